//! The partitioning of Claude Code's batch path (`runTools`, which is given
//! all of a response's tool calls at once): consecutive concurrency-safe
//! calls form one parallel batch; each unsafe call is a serial batch of its
//! own. The streaming machine, given every call at once, runs exactly these
//! batches (a test checks it).

use std::ops::Range;

/// Batches of call indices for calls whose safety is `safe[i]`.
pub fn partition(safe: &[bool]) -> Vec<Range<usize>> {
    let mut batches: Vec<Range<usize>> = Vec::new();
    for (i, &s) in safe.iter().enumerate() {
        match batches.last_mut() {
            Some(last) if s && safe[last.start] => last.end = i + 1,
            _ => batches.push(i..i + 1),
        }
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_cases() {
        // [Read a, Read b, Bash ls, Read c]
        assert_eq!(partition(&[true, true, false, true]), vec![0..2, 2..3, 3..4]);
        // [Glob, Grep, Bash, Read, Edit, Glob]: the Read batch is a safe batch of one.
        assert_eq!(partition(&[true, true, false, true, false, true]), vec![0..2, 2..3, 3..4, 4..5, 5..6]);
        assert_eq!(partition(&[false, false]), vec![0..1, 1..2]);
        assert!(partition(&[]).is_empty());
    }
}
