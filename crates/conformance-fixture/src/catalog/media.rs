//! The binary payloads the fixture hands out (image, audio), as Base64 text.
//!
//! The suite checks only that image and audio content carry data and a MIME type, but a gateway in
//! front of the fixture may decode them, so they are real, minimal files: a 1x1 red PNG and a WAV
//! of eight samples of 8 kHz, 8-bit mono silence. A test below decodes both and checks their
//! headers.

/// A 1x1 red pixel, PNG.
pub const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0FDAAAAAElFTkSuQmCC";

/// Eight samples of silence, WAV (PCM, 8 kHz, 8-bit, mono).
pub const SILENCE_WAV: &str =
    "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;

    #[test]
    fn the_payloads_are_the_files_they_claim_to_be() {
        let png = STANDARD.decode(RED_PIXEL_PNG).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&png[12..16], b"IHDR");
        let wav = STANDARD.decode(SILENCE_WAV).unwrap();
        assert_eq!(&wav[..4], b"RIFF");
        assert_eq!(&wav[8..12], b"WAVE");
        assert_eq!(wav.len(), 52);
    }
}
