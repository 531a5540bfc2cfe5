//! Text for people: positions in a file's text, for errors that name `file:line:column` (rule
//! packs, rule tests, the configuration file), and text from outside (label values from a server,
//! a recording's or a rule file's strings) made safe to print.

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
}
