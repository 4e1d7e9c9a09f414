//! The command that the verbs which run one (`lock`, `rlock`, `wlock`, `sem`, `leader`,
//! `register`, `barrier`) take last, and how it is run.

use clap::Args;

/// `[--foreground] CMD…`: flattened last into a verb's arguments, so that CMD takes every
/// operand after the verb's own.
#[derive(Debug, Clone, Args)]
pub(crate) struct RunArgs {
    /// Run CMD in zkw's process group, as commands that read the terminal need (in a group of
    /// their own they stop at the first read); only CMD itself is then signalled and waited for
    #[arg(long)]
    pub(crate) foreground: bool,
    /// The command and its arguments
    #[arg(
        value_name = "CMD",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub(crate) command: Vec<String>,
}
