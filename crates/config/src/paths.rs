//! How a path written in the configuration becomes a real one: `~/` is the user's home, and a
//! relative path is relative to the configuration file's directory (not to wherever Manifold
//! happens to be started), so that a configuration means the same thing from any working
//! directory.

use std::path::{Path, PathBuf};

use crate::environment::{Environment, Var};

/// The path a written path means. `base_dir` is the configuration file's directory; without one
/// (text loaded from a string) relative paths stay relative.
pub(crate) fn resolve_path(
    written: &str,
    env: &dyn Environment,
    base_dir: Option<&Path>,
) -> Result<PathBuf, (String, String)> {
    let expanded = if written == "~" || written.starts_with("~/") {
        let home = match env.var("HOME") {
            Var::Set(h) if !h.is_empty() => h,
            _ => {
                return Err((
                    "starts with ~ but HOME is not set".to_owned(),
                    "write an absolute path".to_owned(),
                ));
            }
        };
        PathBuf::from(home).join(written.get(2..).unwrap_or_default())
    } else {
        PathBuf::from(written)
    };
    Ok(match base_dir {
        Some(base) if expanded.is_relative() => base.join(expanded),
        _ => expanded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::environment::FixedEnvironment;

    #[test]
    fn home_and_relative_paths() {
        let env = FixedEnvironment::new().with_var("HOME", "/home/ada");
        let base = Path::new("/etc/manifold");
        assert_eq!(
            resolve_path("~/keys/k", &env, Some(base)).unwrap(),
            PathBuf::from("/home/ada/keys/k")
        );
        assert_eq!(
            resolve_path("~", &env, Some(base)).unwrap(),
            PathBuf::from("/home/ada")
        );
        assert_eq!(
            resolve_path("keys/k", &env, Some(base)).unwrap(),
            PathBuf::from("/etc/manifold/keys/k")
        );
        assert_eq!(
            resolve_path("/abs", &env, Some(base)).unwrap(),
            PathBuf::from("/abs")
        );
        assert_eq!(
            resolve_path("rel", &env, None).unwrap(),
            PathBuf::from("rel")
        );
        assert_eq!(
            resolve_path("~other/x", &env, None).unwrap(),
            PathBuf::from("~other/x")
        );
    }

    #[test]
    fn tilde_without_home_is_refused() {
        let (problem, _) = resolve_path("~/k", &FixedEnvironment::new(), None).unwrap_err();
        assert_eq!(problem, "starts with ~ but HOME is not set");
    }
}
