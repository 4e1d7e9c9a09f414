//! `zkw shell`: the verbs of the command line on one session, with line editing, history,
//! completion of verbs and znode paths, a working node (`cd`, `pwd`), and the session's state
//! changes printed as they happen.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rustyline::completion::{Completer, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::Validator;
use rustyline::{Context, Editor, Helper};
use tokio::runtime::{Handle, Runtime};
use zkwire::{Client, SessionState};

use crate::cli;
use crate::connect::Global;
use crate::fail::{Failure, FAILED, USAGE};
use crate::format::session_id;
use crate::interrupt::{interrupted, until_stopped};
use crate::out;

/// The words the shell knows besides the command line's verbs.
const SHELL_WORDS: [&str; 5] = ["cd", "pwd", "help", "exit", "quit"];
/// The shell's own commands and what they do, for `help`.
const SHELL_COMMANDS: [(&str, &str); 4] = [
    ("cd [PATH]", "Make PATH (default /) the working node"),
    ("pwd", "Print the working node"),
    (
        "help [VERB]",
        "This list, or VERB's own help (as VERB --help)",
    ),
    ("exit, quit", "Leave the shell (also Ctrl-D)"),
];
/// The command line's verbs that do not run on the shell's session: they start servers or
/// shells, or print scripts.
const NOT_IN_SHELL: [&str; 4] = ["shell", "sandbox", "demo", "completions"];
/// How long completion waits for the server's list of children.
const COMPLETION_LIMIT: Duration = Duration::from_secs(2);

/// Runs the shell until `exit`, `quit` or end of input; the exit code of the last line that
/// ran a verb (0 when none failed), as `sh` does, so that a script piped in can be checked.
/// Lines read from a terminal go to the history; piped ones do not.
///
/// # Errors
/// [`UNAVAILABLE`](crate::fail::UNAVAILABLE) when no server can be reached at the start; a
/// failure when the terminal cannot be used.
pub(crate) fn run(global: &Global, runtime: &Runtime) -> Result<u8, Failure> {
    // An expired session is replaced (docs/renewal.md): a shell left open through a laptop's
    // sleep or an outage works again once a server answers, rather than failing every line.
    let client = runtime.block_on(global.connect_renewing())?;
    let mut g = global.clone();
    g.shared = Some(client.clone());
    let cwd = Arc::new(Mutex::new("/".to_owned()));
    let helper = ShellHelper {
        client: client.clone(),
        handle: runtime.handle().clone(),
        cwd: Arc::clone(&cwd),
    };
    let mut editor = Editor::<ShellHelper, FileHistory>::new()
        .map_err(|e| Failure::new(FAILED, format!("cannot use the terminal: {e}")))?;
    editor.set_helper(Some(helper));
    let history = std::io::stdin().is_terminal().then(history_file).flatten();
    if let Some(file) = &history {
        let _ = editor.load_history(file);
    }
    report_states(runtime, &client);
    // Ctrl-C while a verb runs stops that verb, not the shell (`stopped_by_ctrl_c`).
    let _interrupts = runtime.block_on(async {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
    });
    out::note(&format!(
        "connected to {} (session {}); help, exit",
        global.server,
        session_id(client.session_id())
    ));
    let mut status = 0;
    loop {
        let prompt = format!("zkw {}> ", current(&cwd));
        match editor.readline(&prompt) {
            Ok(line) => {
                let _ = editor.add_history_entry(line.as_str());
                match run_line(&mut g, runtime, &cwd, &line) {
                    Step::Exit => break,
                    Step::Ran(code) => status = code,
                    Step::Continue => {}
                }
            }
            Err(ReadlineError::Interrupted) => {}
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(Failure::new(FAILED, format!("cannot read a line: {e}"))),
        }
    }
    if let Some(file) = &history {
        let _ = editor.save_history(file);
    }
    runtime.block_on(async {
        let _ = tokio::time::timeout(global.session_timeout, client.close()).await;
    });
    Ok(status)
}

/// Prints each change of the session's state as it happens, on a line of its own (the
/// terminal may be in raw mode: `\r\n`). rustyline's external printer is not used: with it
/// the editor stopped reading keys after the first one.
fn report_states(runtime: &Runtime, client: &Client) {
    let mut states = client.state_stream();
    let client = client.clone();
    runtime.spawn(async move {
        while let Some(state) = states.next().await {
            let text = match state {
                SessionState::Expired => "session Expired: a new one is made when a server \
                    answers (the old one's ephemeral nodes and watches are gone)"
                    .to_owned(),
                SessionState::Connected => {
                    format!("session Connected ({})", session_id(client.session_id()))
                }
                other => format!("session {other:?}"),
            };
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\nzkw: {text}\r\n");
            let _ = stderr.flush();
        }
    });
}

/// `$XDG_DATA_HOME/zkw/history` (or the platform's data directory), created if needed.
fn history_file() -> Option<std::path::PathBuf> {
    let dir = dirs::data_dir()?.join("zkw");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join("history"))
}

/// Whether the shell goes on, and how the line ended.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    /// Nothing ran (an empty line).
    Continue,
    /// A verb or shell word ran, with this exit code.
    Ran(u8),
    Exit,
}

/// Runs one typed line: a shell word or a verb.
fn run_line(g: &mut Global, runtime: &Runtime, cwd: &Mutex<String>, line: &str) -> Step {
    let words = match shell_words::split(line) {
        Ok(words) => words,
        Err(e) => {
            out::note(&format!("cannot split the line: {e}"));
            return Step::Ran(USAGE);
        }
    };
    Step::Ran(match words.first().map(String::as_str) {
        None => return Step::Continue,
        Some("exit" | "quit") => return Step::Exit,
        Some("pwd") => report(out::line(&current(cwd)), g.json),
        Some("cd") => change_directory(g, runtime, cwd, words.get(1).map(String::as_str)),
        Some("help") => match words.get(1) {
            // The shell's own words are in its help.
            Some(word) if SHELL_WORDS.contains(&word.as_str()) => {
                report(out::raw(help_text().as_bytes()), g.json)
            }
            // `help ls`: what `ls --help` prints.
            Some(verb) => run_verb(g, runtime, cwd, vec![verb.clone(), "--help".to_owned()]),
            None => report(out::raw(help_text().as_bytes()), g.json),
        },
        Some(_) => run_verb(g, runtime, cwd, words),
    })
}

/// Parses `words` as a command line and runs it on the shell's session; its exit code.
fn run_verb(g: &Global, runtime: &Runtime, cwd: &Mutex<String>, mut words: Vec<String>) -> u8 {
    if acts_on_the_working_node(&words) {
        words.push(".".to_owned());
    }
    let argv: Vec<String> = std::iter::once("zkw".to_owned()).chain(words).collect();
    let cli = match cli::parse(argv.clone()) {
        Ok(cli) => cli,
        Err(e) => return shown(crate::clap_failure(e, shell_help), g.json),
    };
    let Some(mut command) = cli.command else {
        return 0;
    };
    // The verb as clap read it (options may come first: `--json ls /`).
    let matches = cli::command().try_get_matches_from(&argv).ok();
    let (verb, options) = matches
        .as_ref()
        .and_then(clap::ArgMatches::subcommand)
        .map_or(("", None), |(verb, options)| (verb, Some(options)));
    let verb = verb.to_owned();
    if let Some(option) = options.and_then(connection_option) {
        out::note(&format!(
            "--{option}: the shell's session is made already; give it to `zkw shell`"
        ));
        return USAGE;
    }
    if !runs_in_shell(&verb) {
        out::note(&format!(
            "{verb}: not available in the shell (run it from the command line)"
        ));
        return USAGE;
    }
    let base = current(cwd);
    // In the shell a node's trailing `/` (a tab-completed directory, a habit of `cd`) is
    // the node; only `create` keeps it, for a sequential name (create -s /jobs/).
    let keep_slash = verb == "create";
    for path in command.paths_mut() {
        let resolved = resolve(&base, path);
        *path = if keep_slash {
            resolved
        } else {
            as_node(resolved)
        };
    }
    let verb_global = Global {
        json: g.json || cli.global.json,
        ..g.clone()
    };
    let work = crate::dispatch(&verb_global, &command);
    let result = if stopped_by_ctrl_c(&command) {
        runtime.block_on(async {
            let ctrl_c = crate::interrupt::ctrl_c()?;
            let doing = format!("running {verb}");
            until_stopped(work, interrupted(ctrl_c, &doing)).await
        })
    } else {
        runtime.block_on(work)
    };
    match result {
        Ok(code) => code,
        Err(failure) => shown(failure, verb_global.json),
    }
}

/// Whether Ctrl-C stops `command` by dropping it, back to the prompt: the verbs that ask
/// once and print (a read waiting out a disconnection, a long `ls -R`, `rm -r` of a large
/// tree). The verbs that run until Ctrl-C take it themselves and end as on the command line:
/// `watch`, `cache` and the `--watch` listings print nothing more; a lock, a leadership, a
/// registration or a barrier undoes what it made on the shell's session, which goes on.
fn stopped_by_ctrl_c(command: &cli::Command) -> bool {
    use cli::Command as C;
    match command {
        C::Ls(_) | C::Get(_) | C::Stat(_) | C::Set(_) | C::Create(_) | C::Sync(_) => true,
        // Not while it may ask for confirmation: its read of the answer cannot be cancelled,
        // and would go on taking the keys typed at the prompt.
        C::Rm(a) => !a.recursive || a.yes,
        C::Whoami | C::Acl(_) | C::Revoke(_) => true,
        C::Locks(a) => !a.watch,
        C::Members(a) => !a.watch,
        C::Services(a) => !a.watch,
        C::Watch(_) | C::Cache(_) | C::Lock(_) | C::Rlock(_) | C::Wlock(_) | C::Sem(_) => false,
        C::Leader(_) | C::Register(_) | C::Barrier(_) => false,
        // Not run in the shell.
        C::Sandbox(_) | C::Demo(_) | C::Shell | C::Completions(_) | C::DemoWorker(_) => false,
    }
}

/// A connection option given on a shell line (its long name), which the shell's session,
/// made already, cannot take.
fn connection_option(options: &clap::ArgMatches) -> Option<String> {
    cli::CONNECTION_ARGS
        .iter()
        .find(|id| options.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| id.replace('_', "-"))
}

/// Whether the verb `name` runs on the shell's session ([`in_shell`]).
fn runs_in_shell(name: &str) -> bool {
    cli::command().find_subcommand(name).is_some_and(in_shell)
}

/// Whether a verb of the command line runs on the shell's session: shown in the help, and not
/// one of [`NOT_IN_SHELL`].
fn in_shell(verb: &clap::Command) -> bool {
    !verb.is_hide_set() && !NOT_IN_SHELL.contains(&verb.get_name())
}

/// `help`: the verbs usable here and the shell's own commands, each with its one line.
fn help_text() -> String {
    let command = cli::command();
    let verbs: Vec<(String, String)> = command
        .get_subcommands()
        .filter(|c| in_shell(c))
        .map(|c| {
            let about = c.get_about().map(ToString::to_string).unwrap_or_default();
            (c.get_name().to_owned(), about)
        })
        .collect();
    let shell = SHELL_COMMANDS.map(|(name, about)| (name.to_owned(), about.to_owned()));
    let width = verbs
        .iter()
        .chain(&shell)
        .map(|(n, _)| n.len())
        .max()
        .unwrap_or(0);
    let list = |items: &[(String, String)]| -> String {
        items
            .iter()
            .map(|(name, about)| format!("  {name:<width$}  {about}\n"))
            .collect()
    };
    format!(
        "Commands (paths relative to the working node; VERB --help for its options):\n{}\n\
         Shell:\n{}",
        list(&verbs),
        list(&shell)
    )
}

/// `cd [PATH]`: to PATH (relative to the working node) if it exists, else `/`.
/// `cd`; its exit code.
fn change_directory(g: &Global, runtime: &Runtime, cwd: &Mutex<String>, to: Option<&str>) -> u8 {
    let target = as_node(resolve(&current(cwd), to.unwrap_or("/")));
    let Some(client) = &g.shared else {
        return 0;
    };
    let found = runtime.block_on(g.read(|| client.exists(&target)));
    let failure = match found {
        Ok(Some(_)) => {
            *cwd.lock().unwrap_or_else(PoisonError::into_inner) = target;
            return 0;
        }
        Ok(None) => Failure::zk(&format!("cd: {target}"), &zkwire::Error::NoNode),
        Err(e) => Failure::zk(&format!("cd: {target}"), &e),
    };
    shown(failure, g.json)
}

/// Whether `words` is `ls`, `stat` or `sync` with options only: it then acts on the working
/// node, as `ls` alone lists it.
fn acts_on_the_working_node(words: &[String]) -> bool {
    let Some((verb, options)) = words.split_first() else {
        return false;
    };
    matches!(verb.as_str(), "ls" | "stat" | "sync") && options.iter().all(|o| o.starts_with('-'))
}

/// Where the shell's usage errors send the reader: its `help [VERB]`.
fn shell_help(verb: Option<&str>) -> String {
    verb.map_or_else(|| "help".to_owned(), |v| format!("help {v}"))
}

/// The exit code of a verb's result, its failure printed (the shell goes on).
fn report<T>(result: Result<T, Failure>, json: bool) -> u8 {
    result.map_or_else(|failure| shown(failure, json), |_| 0)
}

/// Prints a failure, as a JSON document with `json`; the exit code it stands for.
fn shown(failure: Failure, json: bool) -> u8 {
    crate::fail::print(&failure, json);
    failure.code
}

fn current(cwd: &Mutex<String>) -> String {
    cwd.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// `path` relative to `base` (absolute paths as they are), `.` and `..` resolved.
pub(crate) fn resolve(base: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{base}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    // A sequential node's trailing `/` (create -s /jobs/) is the caller's to keep.
    let tail = if path.ends_with('/') && !parts.is_empty() {
        "/"
    } else {
        ""
    };
    format!("/{}{tail}", parts.join("/"))
}

/// A resolved path as a node: without its trailing `/`.
fn as_node(resolved: String) -> String {
    match resolved.trim_end_matches('/') {
        "" => "/".to_owned(),
        node if node.len() == resolved.len() => resolved,
        node => node.to_owned(),
    }
}

/// Line editing support: completion of verbs and of paths read from the server.
struct ShellHelper {
    client: Client,
    handle: Handle,
    cwd: Arc<Mutex<String>>,
}

impl ShellHelper {
    /// The verbs and shell words starting with `prefix`.
    fn verbs(prefix: &str) -> Vec<Pair> {
        let command = cli::command();
        let verbs = command
            .get_subcommands()
            .filter(|c| in_shell(c))
            .map(|c| c.get_name().to_owned());
        let mut names: Vec<String> = verbs
            .chain(SHELL_WORDS.iter().map(|w| (*w).to_owned()))
            .filter(|v| v.starts_with(prefix))
            .collect();
        names.sort();
        names.into_iter().map(pair).collect()
    }

    /// The children of the word's directory part whose names start with its last part.
    fn paths(&self, word: &str) -> Vec<Pair> {
        let (dir, prefix) = match word.rfind('/') {
            Some(i) => word.split_at(i + 1),
            None => ("", word),
        };
        // The directory part ends with its `/`: what is listed is that node.
        let absolute = as_node(resolve(
            &current(&self.cwd),
            if dir.is_empty() { "." } else { dir },
        ));
        let listed = self.handle.block_on(async {
            tokio::time::timeout(COMPLETION_LIMIT, self.client.get_children(&absolute)).await
        });
        let Ok(Ok(mut children)) = listed else {
            return Vec::new();
        };
        children.sort();
        children
            .into_iter()
            .filter(|c| c.starts_with(prefix))
            .map(|c| pair(format!("{dir}{c}")))
            .collect()
    }
}

/// A candidate shown as it is and put on the line quoted as the line's splitting reads it
/// back (`'/jobs/nightly run'`), so that a name with a space, a quote or a `$` stays one word.
fn pair(text: String) -> Pair {
    Pair {
        replacement: shell_words::quote(&text).into_owned(),
        display: text,
    }
}

impl Completer for ShellHelper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = line.get(..pos).unwrap_or(line);
        let (start, word) = current_word(before);
        let candidates = if before.get(..start).unwrap_or_default().trim().is_empty() {
            Self::verbs(&word)
        } else if word.starts_with('-') {
            Vec::new()
        } else {
            self.paths(&word)
        };
        Ok((start, candidates))
    }
}

/// The word being typed at the end of `before`: where it starts, and its text as the line's
/// splitting will read it (quotes and backslashes as `sh` reads them). It starts after the
/// last whitespace outside quotes, which may be more than one byte (a no-break space pasted
/// in), so the offset stays on a character boundary for the line editor to replace from.
fn current_word(before: &str) -> (usize, String) {
    #[derive(PartialEq)]
    enum Quote {
        Outside,
        Single,
        Double,
    }
    let (mut start, mut word, mut quote) = (0, String::new(), Quote::Outside);
    let mut chars = before.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match (&quote, c) {
            (Quote::Outside, c) if c.is_whitespace() => {
                start = i + c.len_utf8();
                word.clear();
            }
            (Quote::Outside, '\'') => quote = Quote::Single,
            (Quote::Outside, '"') => quote = Quote::Double,
            (Quote::Single, '\'') | (Quote::Double, '"') => quote = Quote::Outside,
            (Quote::Outside | Quote::Double, '\\') => {
                // Within double quotes a backslash escapes only what is special there.
                let escapes = |n: char| quote == Quote::Outside || "$`\"\\\n".contains(n);
                match chars.next_if(|&(_, n)| escapes(n)) {
                    Some((_, n)) => word.push(n),
                    None => word.push('\\'),
                }
            }
            (_, c) => word.push(c),
        }
    }
    (start, word)
}

impl Hinter for ShellHelper {
    type Hint = String;
}

impl Highlighter for ShellHelper {}

impl Validator for ShellHelper {}

impl Helper for ShellHelper {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(resolve("/", "a"), "/a");
        assert_eq!(resolve("/a/b", "../c"), "/a/c");
        assert_eq!(resolve("/a", "/x/./y"), "/x/y");
        assert_eq!(resolve("/a", ".."), "/");
        assert_eq!(resolve("/a", "../../.."), "/");
        assert_eq!(resolve("/a", "jobs/"), "/a/jobs/");
        assert_eq!(resolve("/", "."), "/");
    }

    #[test]
    fn words_start_after_any_whitespace() {
        assert_eq!(current_word("lo"), (0, "lo".to_owned()));
        assert_eq!(current_word("ls /a"), (3, "/a".to_owned()));
        for line in ["ls\u{a0}/a", "ls\u{3000}/a", "get\t/a"] {
            let (start, word) = current_word(line);
            assert!(line.is_char_boundary(start), "{line:?}");
            assert_eq!((&line[start..], word.as_str()), ("/a", "/a"), "{line:?}");
        }
    }

    /// The word being completed is read as the line will be split: a quoted or escaped space
    /// does not start a new word, and the candidate goes back quoted.
    #[test]
    fn quoted_words_complete_and_candidates_are_quoted() {
        let cases = [
            ("get '/my n", 4, "/my n"),
            ("get \"/my n", 4, "/my n"),
            ("get /my\\ n", 4, "/my n"),
            ("get '/my dir'/ch", 4, "/my dir/ch"),
            ("get \"/a\\$b\\c", 4, "/a$b\\c"),
            ("set '/x' 'one two' th", 19, "th"),
        ];
        for (line, start, word) in cases {
            assert_eq!(current_word(line), (start, word.to_owned()), "{line:?}");
            // Split as a finished line, the word reads the same.
            let last = shell_words::split(&format!("{line}{}", closing(line))).unwrap();
            assert_eq!(last.last().map(String::as_str), Some(word), "{line:?}");
        }
        assert_eq!(
            pair("/jobs/nightly run".to_owned()).replacement,
            "'/jobs/nightly run'"
        );
        assert_eq!(pair("/it's".to_owned()).replacement, "'/it'\\''s'");
        assert_eq!(
            pair("/plain-name_0".to_owned()).replacement,
            "/plain-name_0"
        );
        for name in ["/a b", "/it's", "/$HOME", "/tab\there", "/back\\slash"] {
            let quoted = pair(name.to_owned()).replacement;
            assert_eq!(shell_words::split(&quoted).unwrap(), [name], "{quoted}");
        }
    }

    /// The quote that `line` leaves open, if any.
    fn closing(line: &str) -> &'static str {
        let single = line.matches('\'').count() % 2 == 1;
        let double = line.matches('"').count() % 2 == 1;
        match (single, double) {
            (true, _) => "'",
            (_, true) => "\"",
            _ => "",
        }
    }

    #[test]
    fn ls_stat_and_sync_without_a_path_act_on_the_working_node() {
        let words = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        for line in ["ls", "ls -R", "ls -s -R", "stat", "stat --json", "sync"] {
            assert!(acts_on_the_working_node(&words(line)), "{line}");
        }
        for line in ["ls /a", "ls -R a", "get", "stat /x --json", "rm -r"] {
            assert!(!acts_on_the_working_node(&words(line)), "{line}");
        }
    }

    #[test]
    fn usage_errors_point_at_the_shells_help() {
        let error = |args: &[&str]| {
            let argv = std::iter::once("zkw").chain(args.iter().copied());
            crate::clap_failure(cli::parse(argv).unwrap_err(), shell_help).message
        };
        assert!(
            error(&["frob"]).ends_with(" (see help)"),
            "{}",
            error(&["frob"])
        );
        assert!(
            error(&["stat"]).ends_with(" (see help stat)"),
            "{}",
            error(&["stat"])
        );
    }

    #[test]
    fn verbs_complete() {
        let names: Vec<String> = ShellHelper::verbs("lo")
            .into_iter()
            .map(|p| p.replacement)
            .collect();
        assert_eq!(names, ["lock", "locks"]);
        assert!(ShellHelper::verbs("__").is_empty());
        assert!(ShellHelper::verbs("sa").is_empty());
    }

    /// `help` lists what can be typed here, not the command line's help.
    #[test]
    fn help_lists_the_shell_commands() {
        let help = help_text();
        for word in [
            "\n  ls ",
            "\n  lock ",
            "\n  locks ",
            "\n  cd [PATH] ",
            "\n  pwd ",
            "exit, quit",
        ] {
            assert!(help.contains(word), "{word:?} missing: {help}");
        }
        for absent in ["sandbox", "demo", "completions", "--server", "Usage:"] {
            assert!(!help.contains(absent), "{absent:?} listed: {help}");
        }
    }
}
