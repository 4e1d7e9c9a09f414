//! `multi` (transactions) and `multiRead`.

use bytes::Bytes;

use super::writes::CreateRecord;
use super::{Client, CreateOptions, OpResult, ReadResult};
use crate::error::{Error, ProtocolError};
use crate::proto::{
    op, CheckVersionRequest, DeleteRequest, ErrorCode, GetChildrenRequest, GetDataRequest, MultiOp,
    MultiRequest, MultiResponse, MultiResult, Operation, SetDataRequest,
};

/// One write of a [`Client::multi`] transaction.
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire::Op;
///
/// // Both nodes change, or neither.
/// client.multi(&[Op::set_data("/a", "1", None), Op::set_data("/b", "1", None)]).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Create a node.
    Create {
        /// Path (client view).
        path: String,
        /// Initial data.
        data: Bytes,
        /// Mode, ACL, TTL.
        options: CreateOptions,
    },
    /// Delete a node (any version when `None`).
    Delete {
        /// Path (client view).
        path: String,
        /// Expected version.
        version: Option<i32>,
    },
    /// Set a node's data (any version when `None`).
    SetData {
        /// Path (client view).
        path: String,
        /// New data.
        data: Bytes,
        /// Expected version.
        version: Option<i32>,
    },
    /// Fail the transaction unless the node exists with data version `version` (any
    /// version when `None`).
    Check {
        /// Path (client view).
        path: String,
        /// Expected version; `None` for any.
        version: Option<i32>,
    },
}

impl Op {
    /// A create op, with options as [`Client::create`] takes them.
    ///
    /// ```
    /// use zkwire::{CreateMode, CreateOptions, Op};
    /// let sequential = CreateOptions::persistent_sequential();
    /// let op = Op::create("/jobs/job-", b"payload", &sequential);
    /// # let _ = op;
    /// ```
    pub fn create(
        path: impl Into<String>,
        data: impl AsRef<[u8]>,
        options: &CreateOptions,
    ) -> Self {
        Self::Create {
            path: path.into(),
            data: Bytes::copy_from_slice(data.as_ref()),
            options: options.clone(),
        }
    }

    /// A delete op.
    ///
    /// ```
    /// use zkwire::Op;
    /// let op = Op::delete("/todo/job-1", Some(3)); // fails the multi unless at version 3
    /// # let _ = op;
    /// ```
    pub fn delete(path: impl Into<String>, version: Option<i32>) -> Self {
        Self::Delete {
            path: path.into(),
            version,
        }
    }

    /// A setData op.
    ///
    /// ```
    /// use zkwire::Op;
    /// let op = Op::set_data("/config/db", "postgres://db2", None);
    /// # let _ = op;
    /// ```
    pub fn set_data(path: impl Into<String>, data: impl AsRef<[u8]>, version: Option<i32>) -> Self {
        Self::SetData {
            path: path.into(),
            data: Bytes::copy_from_slice(data.as_ref()),
            version,
        }
    }

    /// A check that the node exists, with data version `version` unless `None`.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::Op;
    ///
    /// // Write /config/db only if /config/schema is still at the version read.
    /// let (_schema, stat) = client.get_data("/config/schema").await?;
    /// client
    ///     .multi(&[
    ///         Op::check("/config/schema", Some(stat.version)),
    ///         Op::set_data("/config/db", "postgres://db2", None),
    ///     ])
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn check(path: impl Into<String>, version: Option<i32>) -> Self {
        Self::Check {
            path: path.into(),
            version,
        }
    }
}

/// One read of a [`Client::multi_read`].
///
/// ```no_run
/// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
/// use zkwire::ReadOp;
///
/// let reads = [ReadOp::GetData("/config".into()), ReadOp::GetChildren("/workers".into())];
/// let results = client.multi_read(&reads).await?; // one round trip
/// # let _ = results;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadOp {
    /// Read a node's data and Stat.
    GetData(String),
    /// List a node's children.
    GetChildren(String),
}

impl Client {
    /// Applies every op atomically, or none (servers 3.4+).
    ///
    /// Returns one result per op. An empty list succeeds without a round trip.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{CreateMode, CreateOptions, Op, OpResult};
    /// // Move a job from /todo to /done, unless it changed since it was read.
    /// let (data, stat) = client.get_data("/todo/job-1").await?;
    /// let results = client
    ///     .multi(&[
    ///         Op::check("/todo/job-1", Some(stat.version)),
    ///         Op::delete("/todo/job-1", None),
    ///         Op::create("/done/job-1", data, &CreateOptions::persistent()),
    ///     ])
    ///     .await?;
    /// assert_eq!(results[0], OpResult::Check);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::MultiFailed`] with the index of the op that failed and its error (nothing was
    /// applied); the errors common to every operation.
    pub async fn multi(&self, ops: &[Op]) -> Result<Vec<OpResult>, Error> {
        let results = self
            .send_multi::<op::Multi, _>(ops, |op| self.multi_op(op))
            .await?;
        if let Some(index) = results.iter().position(is_failure) {
            let error = match &results[index] {
                MultiResult::Error(code) => Error::from_code(*code),
                _ => Error::RuntimeInconsistency,
            };
            return Err(Error::MultiFailed {
                index,
                error: Box::new(error),
            });
        }
        ops.iter()
            .zip(results)
            .map(|(op, result)| self.op_result(op, result))
            .collect()
    }

    /// Runs several reads in one round trip (servers 3.6+). Each read succeeds or fails on
    /// its own; no watches are set.
    ///
    /// ```no_run
    /// # async fn run(client: zkwire::Client) -> Result<(), zkwire::Error> {
    /// use zkwire::{ReadOp, ReadResult};
    /// let reads = [ReadOp::GetData("/config".into()), ReadOp::GetChildren("/jobs".into())];
    /// for result in client.multi_read(&reads).await? {
    ///     match result {
    ///         Ok(ReadResult::Data { data, .. }) => println!("{} bytes", data.len()),
    ///         Ok(ReadResult::Children { children }) => println!("{} children", children.len()),
    ///         Ok(_) => {}
    ///         Err(e) => println!("this read failed: {e}"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn multi_read(
        &self,
        ops: &[ReadOp],
    ) -> Result<Vec<Result<ReadResult, Error>>, Error> {
        let results = self
            .send_multi::<op::MultiRead, _>(ops, |op| self.read_op(op))
            .await?;
        ops.iter().zip(results).map(read_result).collect()
    }

    /// Sends `ops`, each made a [`MultiOp`] by `multi_op`, as one `O` (multi or multiRead):
    /// one result per op. No ops: no results, and nothing is sent.
    async fn send_multi<O, T>(
        &self,
        ops: &[T],
        multi_op: impl Fn(&T) -> Result<MultiOp, Error>,
    ) -> Result<Vec<MultiResult>, Error>
    where
        O: Operation<Request = MultiRequest, Reply = MultiResponse>,
    {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let request = MultiRequest {
            ops: ops.iter().map(multi_op).collect::<Result<_, _>>()?,
        };
        let response = self.call_op::<O>(&request).await?;
        one_result_per_op(response, ops.len())
    }

    fn multi_op(&self, op: &Op) -> Result<MultiOp, Error> {
        Ok(match op {
            Op::Create {
                path,
                data,
                options,
            } => match self.create_record(path, data.clone(), options)? {
                // Plain create (1): every server version accepts it inside multi.
                CreateRecord::Plain(r) => MultiOp::Create(r),
                CreateRecord::Container(r) => MultiOp::CreateContainer(r),
                CreateRecord::Ttl(r) => MultiOp::CreateTtl(r),
            },
            Op::Delete { path, version } => MultiOp::Delete(DeleteRequest {
                path: self.server_path(path)?,
                version: version.unwrap_or(-1),
            }),
            Op::SetData {
                path,
                data,
                version,
            } => MultiOp::SetData(SetDataRequest {
                path: self.server_path(path)?,
                data: Some(data.clone()),
                version: version.unwrap_or(-1),
            }),
            Op::Check { path, version } => MultiOp::Check(CheckVersionRequest {
                path: self.server_path(path)?,
                version: version.unwrap_or(-1),
            }),
        })
    }

    fn read_op(&self, op: &ReadOp) -> Result<MultiOp, Error> {
        Ok(match op {
            ReadOp::GetData(p) => MultiOp::GetData(GetDataRequest {
                path: self.server_path(p)?,
                watch: false,
            }),
            ReadOp::GetChildren(p) => MultiOp::GetChildren(GetChildrenRequest {
                path: self.server_path(p)?,
                watch: false,
            }),
        })
    }

    /// `op`'s result; one of a kind `op` cannot produce is the server's protocol error.
    fn op_result(&self, op: &Op, result: MultiResult) -> Result<OpResult, Error> {
        Ok(match (op, result) {
            // A plain create answers with a CreateResponse; container and TTL creates with
            // a Create2Response.
            (Op::Create { .. }, MultiResult::Create(r)) => OpResult::Create {
                path: self.client_path(r.path),
                stat: None,
            },
            (Op::Create { .. }, MultiResult::Create2(r)) => OpResult::Create {
                path: self.client_path(r.path),
                stat: Some(r.stat),
            },
            (Op::Delete { .. }, MultiResult::Delete) => OpResult::Delete,
            (Op::SetData { .. }, MultiResult::SetData(r)) => OpResult::SetData { stat: r.stat },
            (Op::Check { .. }, MultiResult::Check) => OpResult::Check,
            _ => return Err(Error::Protocol(ProtocolError::UnexpectedMultiResult)),
        })
    }
}

/// The results of a multi reply, which must hold exactly one per op.
fn one_result_per_op(response: MultiResponse, ops: usize) -> Result<Vec<MultiResult>, Error> {
    if response.results.len() != ops {
        return Err(Error::Protocol(ProtocolError::UnexpectedMultiResult));
    }
    Ok(response.results)
}

/// The op that made the transaction fail: the first error result other than `Ok` (ops
/// before it) and `RuntimeInconsistency` (ops after it).
fn is_failure(result: &MultiResult) -> bool {
    matches!(result, MultiResult::Error(code)
        if *code != ErrorCode::Ok && *code != ErrorCode::RuntimeInconsistency)
}

/// A read's own outcome; a result of a kind the read cannot produce fails the whole call
/// (the outer error: the server broke the protocol).
fn read_result((op, result): (&ReadOp, MultiResult)) -> Result<Result<ReadResult, Error>, Error> {
    Ok(match (op, result) {
        (ReadOp::GetData(_), MultiResult::GetData(r)) => Ok(ReadResult::Data {
            data: r.data.unwrap_or_default(),
            stat: r.stat,
        }),
        (ReadOp::GetChildren(_), MultiResult::GetChildren(r)) => Ok(ReadResult::Children {
            children: r.children,
        }),
        (_, MultiResult::Error(code)) => Err(Error::from_code(code)),
        _ => return Err(Error::Protocol(ProtocolError::UnexpectedMultiResult)),
    })
}
