//! `manifold audit search --tool` with a name as clients see it. The trail keeps what each
//! server was asked (`echo` on server `everything`, `demo://doc.md`), while a user knows the
//! gateway's names (`everything__echo`, `everything+demo://doc.md`); a search by the latter that
//! matches nothing is tried again as the former.

use manifold_config::Config;
use manifold_gateway::catalog::naming::PREFIX_SEPARATOR;
use manifold_gateway::catalog::uri;

/// The configured server and its own name for `target` when `target` is `PREFIX__NAME` (a tool
/// or prompt) or `SCHEME-PREFIX+URI` (a resource) of one of `config`'s servers; the longest
/// prefix wins, so `git` never takes `git_lab__log`'s rows.
pub(super) fn server_and_name(target: &str, config: &Config) -> Option<(String, String)> {
    let prefixed = config.servers.iter().filter_map(|server| {
        let tool = target
            .strip_prefix(server.prefix.as_str())
            .and_then(|rest| rest.strip_prefix(PREFIX_SEPARATOR))
            .map(|name| (server.prefix.len(), name));
        let resource = uri::split(target)
            .filter(|(head, _)| *head == uri::scheme_prefix(&server.prefix))
            .map(|(head, original)| (head.len(), original));
        tool.or(resource)
            .filter(|(_, name)| !name.is_empty())
            .map(|(len, name)| (len, server.name.clone(), name.to_owned()))
    });
    prefixed
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, server, name)| (server, name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use manifold_config::FixedEnvironment;

    fn config(text: &str) -> Config {
        let env = FixedEnvironment::new().with_var("HOME", "/home/ada");
        Config::from_str_with(text, "m.toml", None, &env).unwrap()
    }

    #[test]
    fn a_tool_prompt_or_resource_as_clients_see_it_names_its_server_and_its_own_name() {
        let c = config(
            "[servers.everything]\ncommand = \"x\"\n\
             [servers.git]\ncommand = \"x\"\n\
             [servers.git_lab]\ncommand = \"x\"\n\
             [servers.notes]\ncommand = \"x\"\nprefix = \"n\"\n",
        );
        let pair = |s: &str, n: &str| Some((s.to_owned(), n.to_owned()));
        assert_eq!(
            server_and_name("everything__echo", &c),
            pair("everything", "echo")
        );
        assert_eq!(server_and_name("git_lab__log", &c), pair("git_lab", "log"));
        assert_eq!(server_and_name("n__read", &c), pair("notes", "read"));
        assert_eq!(
            server_and_name("everything+demo://doc.md", &c),
            pair("everything", "demo://doc.md")
        );
        assert_eq!(
            server_and_name("git-lab+file:///r/a.md", &c),
            pair("git_lab", "file:///r/a.md")
        );
        for unknown in [
            "echo",
            "other__echo",
            "everything__",
            "notes__read",
            "demo://doc.md",
        ] {
            assert_eq!(server_and_name(unknown, &c), None, "{unknown}");
        }
    }
}
