//! Values that came from `${...}` interpolation, and session keys, travel in a [`Secret`] so that
//! printing a configuration by accident (`{:?}`, `{}`, an error message, a log field) can never
//! reveal them: the only way to the value is the explicitly named [`Secret::expose`].

use std::fmt;

/// A value that must never be printed. `Debug` and `Display` both write `<redacted>`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret<T = String>(T);

/// What every secret prints as.
pub const REDACTED: &str = "<redacted>";

impl<T> Secret<T> {
    pub fn new(value: T) -> Secret<T> {
        Secret(value)
    }

    /// The value itself, for the code that must hand it on (a child's environment, a header,
    /// a cipher). Never format it.
    pub fn expose(&self) -> &T {
        &self.0
    }

    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new("hunter2".to_owned());
        assert_eq!(format!("{s:?}"), "<redacted>");
        assert_eq!(format!("{s}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(&s)), "Some(<redacted>)");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn byte_keys_are_redacted_too() {
        let k = Secret::new([7u8; 32]);
        assert_eq!(format!("{k:?}"), "<redacted>");
        assert_eq!(k.expose(), &[7u8; 32]);
    }
}
