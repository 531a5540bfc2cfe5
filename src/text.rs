//! Text for people: positions in a file's text, for errors that name `file:line:column` (rule
//! packs, rule tests, the configuration file), and text from outside (label values from a server,
//! a recording's or a rule file's strings) made safe to print.

/// The known name closest to a misspelt `name`, if one is close enough to be what was meant
/// (`kv-cache-presure` -> `kv-cache-pressure`): for the "did you mean" of an error.
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .map(|k| (strsim::damerau_levenshtein(name, k), k))
        .filter(|(d, k)| *d > 0 && *d <= (k.chars().count() / 4).clamp(1, 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// ` Did you mean "x"?` after an error about `name`, or nothing.
pub fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, known).map(|k| format!(" Did you mean {k:?}?")).unwrap_or_default()
}

/// Collapse any run of whitespace (including newlines from server messages) into one space, so
/// every printed item stays on its own line, with [`printable`]'s replacements.
pub fn one_line(s: &str) -> String {
    printable(s).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text with its line breaks and tabs kept and every other control character (ESC sequences,
/// carriage returns that would overwrite a line) and bidirectional override replaced by U+FFFD:
/// nothing from outside may drive a terminal or reverse the text around it.
pub fn printable(s: &str) -> String {
    s.chars().map(|c| if (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c) { '\u{FFFD}' } else { c }).collect()
}

/// The invisible characters that change the direction of the text after them (embeddings,
/// overrides, isolates, marks): in a label value they can show one model's name reversed inside
/// another's, in every format.
pub fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// Where each line of a file starts, found once per file: a byte offset becomes a line and column
/// by a binary search, not by rescanning the text before it for every position asked.
pub struct LineIndex<'a> {
    src: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(src: &'a str) -> Self {
        let starts = std::iter::once(0).chain(src.match_indices('\n').map(|(i, _)| i + 1)).collect();
        LineIndex { src, starts }
    }

    /// The 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, byte: usize) -> (usize, usize) {
        let byte = byte.min(self.src.len());
        let line = self.starts.partition_point(|&start| start <= byte);
        let start = self.starts[line - 1];
        let col = self.src.get(start..byte).map(|l| l.chars().count()).unwrap_or(0) + 1;
        (line, col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_index_counts_lines_and_characters_like_an_editor() {
        let src = "ab\n\nhé x\n";
        let lines = LineIndex::new(src);
        assert_eq!(lines.line_col(0), (1, 1));
        assert_eq!(lines.line_col(2), (1, 3), "the newline itself is the end of line 1");
        assert_eq!(lines.line_col(3), (2, 1));
        assert_eq!(lines.line_col(4), (3, 1));
        assert_eq!(lines.line_col(src.find('x').unwrap()), (3, 4), "é is one column");
        assert_eq!(lines.line_col(src.len()), (4, 1));
        assert_eq!(lines.line_col(src.len() + 10), (4, 1), "past the end is the end");
        // Inside a multi-byte character: the column of the character, not a panic.
        assert_eq!(lines.line_col(src.find('é').unwrap() + 1).0, 3);
    }

    #[test]
    fn a_misspelt_name_is_matched_to_the_known_one_it_is_close_to() {
        let known = ["kv-cache-pressure", "slow-decode", "ttft_p95_high", "queue_p95_high"];
        assert_eq!(closest("kv-cache-presure", known), Some("kv-cache-pressure"));
        assert_eq!(closest("ttft_p95_hgh", known), Some("ttft_p95_high"));
        assert_eq!(closest("slow-decdoe", known), Some("slow-decode"));
        // Nothing close, or the name itself: no suggestion.
        assert_eq!(closest("gpu", known), None);
        assert_eq!(closest("slow-decode", known), None);
        assert_eq!(did_you_mean("ttft_p95_hgh", known), " Did you mean \"ttft_p95_high\"?");
        assert_eq!(did_you_mean("zzz", known), "");
    }
}
