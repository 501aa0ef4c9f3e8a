//! What an authority runs: a server's configuration, and the deadlines a request
//! may set for itself.



use super::super::policy::Supervision;
use crate::config::Timeout;
use crate::process::remote::Remote;
use crate::process::spawn::Launch;


/// What an authority needs to know about its server.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub name: String,
    pub endpoint: Endpoint,
    /// The command (or URL) as it may be shown: secrets from `${env:...}` stay
    /// templates.
    pub command_shown: String,
    pub connect_timeout: Timeout,
    pub cleanup_timeout: Timeout,
    /// Where the server's stderr is also appended (the supervisor's `logs/`).
    pub stderr_log: Option<std::path::PathBuf>,
    /// Restarts, health checks and idle stop: what the authority does unasked.
    pub supervision: Supervision,
    /// What defines the server's process or session, to tell whether a
    /// generation runs what the fleet file says (docs/design.md §16).
    pub definition: crate::config::Definition,
}

/// How a server is reached.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// A process of ours, spoken to over its stdin and stdout.
    Stdio(Launch),
    /// A remote server over streamable HTTP.
    Http(Remote),
}

impl Endpoint {
    /// The transport's name in output: `stdio` or `http`.
    pub fn name(&self) -> &'static str {
        match self {
            Endpoint::Stdio(_) => "stdio",
            Endpoint::Http(_) => "http",
        }
    }
}

impl ServerConfig {
    /// What the authority of `spec` needs, from the fleet file.
    /// `auth_root` is the fleet's state directory, where a remote server's
    /// tokens are kept (`auth/NAME.json`).
    pub fn from_spec(
        spec: &crate::config::ServerSpec,
        stderr_log: Option<std::path::PathBuf>,
        auth_root: Option<&std::path::Path>,
    ) -> ServerConfig {
        let (endpoint, command_shown) = match &spec.transport {
            crate::config::Transport::Stdio(stdio) => {
                let args: Vec<String> = stdio.args.iter().map(|a| a.value.clone()).collect();
                // `env_file:` values, then `env:` (docs/design.md §7).
                let env = stdio
                    .environment()
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.value.clone()))
                    .collect();
                // Whatever `${env:}` or an env file put into the launch line.
                let secrets = std::iter::once(&stdio.command)
                    .chain(&stdio.args)
                    .chain(stdio.env.iter().map(|(_, v)| v))
                    .chain(stdio.env_files.iter().flat_map(|f| f.vars.iter().map(|(_, v)| v)))
                    .flat_map(|t| t.secrets());
                let launch = Launch::new(
                    &stdio.command.value,
                    &args,
                    stdio.shell,
                    env,
                    stdio.cwd.clone(),
                    &spec.name,
                )
                .with_secrets(secrets);
                (Endpoint::Stdio(launch), stdio.command.display().to_owned())
            }
            crate::config::Transport::Http(http) => {
                let remote = Remote {
                    url: http.url.value.clone(),
                    headers: http
                        .headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.value.clone()))
                        .collect(),
                    keeper: match (&http.auth, auth_root) {
                        (Some(auth), Some(root)) => Some(crate::auth::Keeper::new(
                            crate::auth::TokenStore::for_spec(root, &spec.name, auth),
                            http.url.value.clone(),
                            (**auth).clone(),
                        )),
                        _ => None,
                    },
                    ca: None,
                };
                (Endpoint::Http(remote), http.url.display().to_owned())
            }
        };
        ServerConfig {
            name: spec.name.clone(),
            definition: crate::config::Definition::of(spec),
            endpoint,
            command_shown,
            connect_timeout: spec.connect_timeout,
            cleanup_timeout: spec.cleanup_timeout,
            stderr_log,
            supervision: Supervision {
                restart: spec.restart,
                health: spec.health,
                idle_timeout: spec.idle_timeout,
            },
        }
    }
}

/// Per-request overrides of the server's deadlines (L2: settable per call).
#[derive(Debug, Clone, Copy)]
pub struct CallOptions {
    /// `None`: the server's own deadline.
    pub connect_timeout: Option<Timeout>,
    pub cleanup_timeout: Option<Timeout>,
    /// How long the caller waits for the authority to take the request. A request
    /// not taken in time is withdrawn and never runs.
    pub wait_timeout: Timeout,
    /// Recover a quarantined server: SIGKILL what is left of it, confirm, go on (L7).
    pub force: bool,
}

impl Default for CallOptions {
    /// The server's own deadlines, and no limit on the wait for the authority
    /// (in-process callers; the supervisor always sets one).
    fn default() -> CallOptions {
        CallOptions {
            connect_timeout: None,
            cleanup_timeout: None,
            wait_timeout: Timeout::Never,
            force: false,
        }
    }
}
