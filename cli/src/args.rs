//! Hand-written command-line parsing: global options, a verb, its flags, its operands and
//! (for the verbs that run a command) the command line after `--`.

use std::time::Duration;

use crate::duration::parse_duration;
use crate::fail::Failure;

/// One flag a verb accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flag {
    /// The one-letter form (`-e`), if any.
    pub(crate) short: Option<char>,
    /// The long form, without the dashes (`ephemeral`); also the flag's key.
    pub(crate) long: &'static str,
    /// Whether the flag takes a value.
    pub(crate) value: bool,
}

/// A boolean flag.
pub(crate) const fn switch(short: Option<char>, long: &'static str) -> Flag {
    Flag {
        short,
        long,
        value: false,
    }
}

/// A flag with a value.
pub(crate) const fn valued(short: Option<char>, long: &'static str) -> Flag {
    Flag {
        short,
        long,
        value: true,
    }
}

/// Flags every verb accepts, before or after the verb.
pub(crate) const GLOBAL_FLAGS: &[Flag] = &[
    valued(None, "server"),
    valued(None, "session-timeout"),
    valued(None, "auth"),
    valued(None, "tls-ca"),
    valued(None, "tls-cert"),
    valued(None, "tls-key"),
    valued(None, "sasl"),
    switch(None, "json"),
    switch(Some('h'), "help"),
    switch(None, "version"),
];

/// What a verb accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VerbSpec {
    /// The verb as typed.
    pub(crate) name: &'static str,
    /// Its own flags (the global ones are always accepted too).
    pub(crate) flags: &'static [Flag],
    /// For verbs that run a command: how many operands come before it. The command starts
    /// after `--`, or at the first operand past that count; everything after it is taken
    /// verbatim.
    pub(crate) command_after: Option<usize>,
}

/// A parsed command line.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    /// Flags in the order given: (long name, value or empty).
    flags: Vec<(&'static str, String)>,
    /// Operands (positional arguments).
    pub(crate) operands: Vec<String>,
    /// The command to run (verbs with `command_after`).
    pub(crate) command: Vec<String>,
}

impl Parsed {
    /// Whether the flag was given.
    pub(crate) fn has(&self, long: &str) -> bool {
        self.flags.iter().any(|(name, _)| *name == long)
    }

    /// The flag's value (the last one given wins).
    pub(crate) fn value(&self, long: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(name, _)| *name == long)
            .map(|(_, v)| v.as_str())
    }

    /// Every value given for a repeatable flag, in order.
    pub(crate) fn values(&self, long: &str) -> Vec<&str> {
        self.flags
            .iter()
            .filter(|(name, _)| *name == long)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The flag's value as a duration.
    pub(crate) fn duration(&self, long: &str) -> Result<Option<Duration>, Failure> {
        self.value(long)
            .map(|v| parse_duration(v).map_err(|e| Failure::usage(format!("--{long}: {e}"))))
            .transpose()
    }

    /// The flag's value as a number.
    pub(crate) fn number<T: std::str::FromStr>(&self, long: &str) -> Result<Option<T>, Failure> {
        self.value(long)
            .map(|v| {
                v.parse()
                    .map_err(|_| Failure::usage(format!("--{long}: not a valid number: {v:?}")))
            })
            .transpose()
    }

    /// Exactly `names.len()` operands, or a usage error naming the missing or extra one.
    pub(crate) fn expect_operands(&self, names: &[&str]) -> Result<Vec<String>, Failure> {
        self.operands_between(names, &[])
    }

    /// The `required` operands, then up to `optional.len()` more.
    pub(crate) fn operands_between(
        &self,
        required: &[&str],
        optional: &[&str],
    ) -> Result<Vec<String>, Failure> {
        if let Some(missing) = required.get(self.operands.len()) {
            return Err(Failure::usage(format!("missing operand {missing}")));
        }
        if let Some(extra) = self.operands.get(required.len() + optional.len()) {
            return Err(Failure::usage(format!("unexpected operand {extra:?}")));
        }
        Ok(self.operands.clone())
    }
}

/// Checks a node path before anything is sent (`sequential`: a trailing `/` is allowed, the
/// server appends the number).
///
/// # Errors
/// A usage failure saying what is wrong with it.
pub(crate) fn check_path(path: &str, sequential: bool) -> Result<(), Failure> {
    let checked = if sequential {
        zkwire::path::validate_sequential_path(path)
    } else {
        zkwire::path::validate_path(path)
    };
    checked.map_err(|e| Failure::usage(e.to_string()))
}

/// What the command line asks for.
#[derive(Debug)]
pub(crate) enum Invocation {
    /// `zkw --help`, or `zkw` alone.
    Help,
    /// `zkw --version`.
    Version,
    /// A verb: its spec and the whole parsed line (global flags included).
    Verb(VerbSpec, Parsed),
}

/// Parses `args` (without the program name) against `verbs`.
///
/// # Errors
/// A usage [`Failure`] naming the offending argument.
pub(crate) fn parse(args: &[String], verbs: &[VerbSpec]) -> Result<Invocation, Failure> {
    let mut parsed = Parsed::default();
    let mut rest = args.iter();
    let spec = loop {
        let Some(arg) = rest.next() else {
            return match (parsed.has("help"), parsed.has("version")) {
                (true, _) => Ok(Invocation::Help),
                (false, true) => Ok(Invocation::Version),
                (false, false) if args.is_empty() => Ok(Invocation::Help),
                (false, false) => Err(Failure::usage("missing command (see zkw --help)")),
            };
        };
        if arg.starts_with('-') && arg.len() > 1 {
            take_flag(
                arg,
                &mut rest,
                GLOBAL_FLAGS,
                &mut parsed,
                "before the command",
            )?;
            continue;
        }
        break verbs
            .iter()
            .find(|v| v.name == arg.as_str())
            .copied()
            .ok_or_else(|| Failure::usage(format!("unknown command {arg:?} (see zkw --help)")))?;
    };
    let flags: Vec<Flag> = GLOBAL_FLAGS.iter().chain(spec.flags).copied().collect();
    parse_verb_args(&mut rest, &spec, &flags, &mut parsed)?;
    Ok(Invocation::Verb(spec, parsed))
}

/// Parses everything after the verb.
fn parse_verb_args<'a>(
    rest: &mut impl Iterator<Item = &'a String>,
    spec: &VerbSpec,
    flags: &[Flag],
    parsed: &mut Parsed,
) -> Result<(), Failure> {
    let context = format!("for {}", spec.name);
    while let Some(arg) = rest.next() {
        if arg == "--" {
            let tail = rest.by_ref().cloned();
            if spec.command_after.is_some() {
                parsed.command.extend(tail);
            } else {
                parsed.operands.extend(tail);
            }
            break;
        }
        if arg.starts_with('-') && arg.len() > 1 {
            take_flag(arg, rest, flags, parsed, &context)?;
        } else if spec
            .command_after
            .is_some_and(|n| parsed.operands.len() >= n)
        {
            parsed.command.push(arg.clone());
            parsed.command.extend(rest.by_ref().cloned());
            break;
        } else {
            parsed.operands.push(arg.clone());
        }
    }
    Ok(())
}

/// Takes one `--long[=value]`, `-x [value]` or `-xyz` argument (and its value).
fn take_flag<'a>(
    arg: &str,
    rest: &mut impl Iterator<Item = &'a String>,
    flags: &[Flag],
    parsed: &mut Parsed,
    context: &str,
) -> Result<(), Failure> {
    if let Some(long) = arg.strip_prefix("--") {
        let (name, inline) = match long.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (long, None),
        };
        let flag = flags
            .iter()
            .find(|f| f.long == name)
            .ok_or_else(|| Failure::usage(format!("unknown option --{name} {context}")))?;
        return push_flag(flag, inline, rest, parsed);
    }
    let letters: Vec<char> = arg.chars().skip(1).collect();
    for (i, letter) in letters.iter().enumerate() {
        let flag = flags
            .iter()
            .find(|f| f.short == Some(*letter))
            .ok_or_else(|| Failure::usage(format!("unknown option -{letter} {context}")))?;
        if flag.value {
            let inline: String = letters[i + 1..].iter().collect();
            return push_flag(flag, (!inline.is_empty()).then_some(inline), rest, parsed);
        }
        parsed.flags.push((flag.long, String::new()));
    }
    Ok(())
}

/// Records `flag`, taking its value from `inline` or the next argument.
fn push_flag<'a>(
    flag: &Flag,
    inline: Option<String>,
    rest: &mut impl Iterator<Item = &'a String>,
    parsed: &mut Parsed,
) -> Result<(), Failure> {
    let value = match (flag.value, inline) {
        (false, None) => String::new(),
        (false, Some(_)) => return Err(Failure::usage(format!("--{} takes no value", flag.long))),
        (true, Some(v)) => v,
        (true, None) => rest
            .next()
            .cloned()
            .ok_or_else(|| Failure::usage(format!("--{} needs a value", flag.long)))?,
    };
    parsed.flags.push((flag.long, value));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERBS: &[VerbSpec] = &[
        VerbSpec {
            name: "create",
            flags: &[
                switch(Some('e'), "ephemeral"),
                switch(Some('s'), "sequential"),
                valued(None, "ttl"),
            ],
            command_after: None,
        },
        VerbSpec {
            name: "set",
            flags: &[valued(Some('v'), "version")],
            command_after: None,
        },
        VerbSpec {
            name: "lock",
            flags: &[valued(None, "timeout")],
            command_after: Some(1),
        },
    ];

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    fn verb(line: &str) -> Parsed {
        match parse(&args(line), VERBS) {
            Ok(Invocation::Verb(_, p)) => p,
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn flags_operands_and_clusters() {
        let p = verb("--server h:1 create -es /a data --ttl=5s --json");
        assert!(p.has("ephemeral") && p.has("sequential") && p.has("json"));
        assert_eq!(p.value("server"), Some("h:1"));
        assert_eq!(p.value("ttl"), Some("5s"));
        assert_eq!(p.operands, ["/a", "data"]);
        let p = verb("set /a -v3 x");
        assert_eq!((p.value("version"), p.operands.len()), (Some("3"), 2));
        let p = verb("set /a -- -v");
        assert_eq!(p.operands, ["/a", "-v"]);
    }

    #[test]
    fn command_after_dashes_or_operands() {
        let p = verb("lock /l --timeout 2s -- sh -c x --json");
        assert_eq!(p.operands, ["/l"]);
        assert_eq!(p.command, ["sh", "-c", "x", "--json"]);
        let p = verb("lock /l echo --timeout");
        assert_eq!(p.command, ["echo", "--timeout"]);
        assert!(!p.has("timeout"));
    }

    #[test]
    fn errors_are_usage_errors() {
        for line in [
            "bogus",
            "create -x /a",
            "set /a -v",
            "--ttl 1s create /a",
            "create --json=1 /a",
        ] {
            match parse(&args(line), VERBS) {
                Err(f) => assert_eq!(f.code, crate::fail::USAGE, "{line}"),
                Ok(other) => panic!("{line}: {other:?}"),
            }
        }
        assert!(matches!(parse(&[], VERBS), Ok(Invocation::Help)));
        assert!(matches!(
            parse(&args("--version"), VERBS),
            Ok(Invocation::Version)
        ));
    }
}
