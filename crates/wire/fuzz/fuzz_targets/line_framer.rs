//! Fuzzes `LineFramer`: stdio reads arrive in arbitrary pieces, and the lines that come out must
//! not depend on where the reads were cut.
//!
//! Each input is framed three ways (one push, pushes at arbitrary cut points drained after every
//! read, and the same pushes drained only at the end) and compared with a reference model written
//! from the framing rules alone, so a bug shared by all three ways still shows.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use manifold_wire::line::{Frame, LineFramer};

#[derive(Arbitrary, Debug)]
struct Input {
    /// Small limits make over-long lines common; the framer has no minimum.
    limit: u8,
    cuts: Vec<u16>,
    data: Vec<u8>,
}

/// A frame with `TooLong::seen` dropped: how many bytes were buffered when the limit was crossed
/// depends on the reads by design; that it was crossed does not.
#[derive(Debug, PartialEq, Eq)]
enum Out {
    Line(Vec<u8>),
    TooLong,
}

fn normalise(frame: Frame, limit: usize) -> Out {
    match frame {
        Frame::Line(l) => {
            assert!(
                l.len() <= limit,
                "a line of {} bytes passed a limit of {limit}",
                l.len()
            );
            assert!(
                !l.iter().all(u8::is_ascii_whitespace),
                "a blank line was framed"
            );
            Out::Line(l.to_vec())
        }
        Frame::TooLong {
            limit: reported,
            seen,
        } => {
            assert_eq!(reported, limit);
            assert!(
                seen > limit,
                "TooLong reported {seen} bytes for a limit of {limit}"
            );
            Out::TooLong
        }
    }
}

/// The framing rules, applied to the whole stream at once.
fn reference(data: &[u8], limit: usize) -> (Vec<Out>, Option<Vec<u8>>) {
    let mut parts: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let tail = parts.pop().unwrap_or_default();
    let mut out = Vec::new();
    for part in parts {
        let line = part.strip_suffix(b"\r").unwrap_or(part);
        if line.len() > limit {
            out.push(Out::TooLong);
        } else if !line.iter().all(u8::is_ascii_whitespace) {
            out.push(Out::Line(line.to_vec()));
        }
    }
    // An unfinished line may hold one byte more than the limit: a "\r" waiting for its "\n".
    if tail.len() > limit + 1 {
        out.push(Out::TooLong);
        return (out, None);
    }
    let rest = (!tail.iter().all(u8::is_ascii_whitespace)).then(|| tail.to_vec());
    (out, rest)
}

fn cut_points(cuts: &[u16], len: usize) -> Vec<usize> {
    let mut points: Vec<usize> = cuts.iter().map(|&c| usize::from(c) % (len + 1)).collect();
    points.push(0);
    points.push(len);
    points.sort_unstable();
    points.dedup();
    points
}

fn drain(f: &mut LineFramer, limit: usize, out: &mut Vec<Out>) {
    while let Some(frame) = f.next_frame() {
        out.push(normalise(frame, limit));
    }
}

fuzz_target!(|input: Input| {
    let limit = usize::from(input.limit);
    let data = &input.data;
    let want = reference(data, limit);

    let mut whole = LineFramer::new(limit);
    let mut got_whole = Vec::new();
    whole.push(data);
    drain(&mut whole, limit, &mut got_whole);
    let tail_whole = whole.finish().map(|b| b.to_vec());
    assert_eq!(
        (got_whole, tail_whole),
        want,
        "one push disagrees with the rules"
    );

    let points = cut_points(&input.cuts, data.len());
    let mut eager = LineFramer::new(limit);
    let mut lazy = LineFramer::new(limit);
    let mut got_eager = Vec::new();
    for pair in points.windows(2) {
        let piece = &data[pair[0]..pair[1]];
        eager.push(piece);
        drain(&mut eager, limit, &mut got_eager);
        assert!(
            eager.buffered() <= limit + 1,
            "the framer kept more than one line's worth"
        );
        lazy.push(piece);
    }
    let tail_eager = eager.finish().map(|b| b.to_vec());
    assert_eq!(
        (got_eager, tail_eager),
        want,
        "split reads disagree with one read"
    );

    let mut got_lazy = Vec::new();
    drain(&mut lazy, limit, &mut got_lazy);
    let tail_lazy = lazy.finish().map(|b| b.to_vec());
    assert_eq!(
        (got_lazy, tail_lazy),
        want,
        "late draining disagrees with one read"
    );
});
