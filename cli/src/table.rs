//! Aligned text tables, and the two decisions that depend on where the output goes: colour
//! (only on a terminal, unless asked) and a width limit (only on a terminal, from its size).

use std::fmt::Write as _;

/// `--color`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColourChoice {
    /// Colour when standard output is a terminal and NO_COLOR is unset.
    #[default]
    Auto,
    Always,
    Never,
}

/// Whether to colour: `Auto` colours a terminal only, and never when `NO_COLOR` is set
/// (no-color.org) or `TERM=dumb`.
pub fn colour_enabled(
    choice: ColourChoice,
    stdout_is_terminal: bool,
    no_color: bool,
    dumb_terminal: bool,
) -> bool {
    match choice {
        ColourChoice::Always => true,
        ColourChoice::Never => false,
        ColourChoice::Auto => stdout_is_terminal && !no_color && !dumb_terminal,
    }
}

/// The widest a line may be: the terminal's columns on a terminal; no limit through a pipe
/// or into a file, where a cut line would lose data.
pub fn width_limit(stdout_is_terminal: bool, terminal_columns: Option<u16>) -> Option<usize> {
    match (stdout_is_terminal, terminal_columns) {
        (true, Some(columns)) if columns > 0 => Some(usize::from(columns)),
        _ => None,
    }
}

/// How a table is printed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Render {
    pub colour: bool,
    pub width: Option<usize>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    #[default]
    Plain,
    Bold,
    Green,
    Yellow,
    Red,
    Dim,
}

impl Style {
    fn code(self) -> Option<&'static str> {
        match self {
            Style::Plain => None,
            Style::Bold => Some("1"),
            Style::Green => Some("32"),
            Style::Yellow => Some("33"),
            Style::Red => Some("31"),
            Style::Dim => Some("2"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cell {
    pub text: String,
    pub style: Style,
}

impl Cell {
    pub fn styled(text: impl Into<String>, style: Style) -> Cell {
        Cell { text: text.into(), style }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, style: Style::Plain }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::from(text.to_owned())
    }
}

/// Columns with a header each; the last column is never padded, and is the one cut (with
/// `…`) when a line is wider than the width limit.
#[derive(Clone, Debug, Default)]
pub struct Table {
    columns: Vec<(String, Align)>,
    rows: Vec<Vec<Cell>>,
}

const GAP: &str = "  ";

impl Table {
    pub fn new(columns: &[(&str, Align)]) -> Table {
        Table {
            columns: columns.iter().map(|(name, align)| ((*name).to_owned(), *align)).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank, extra cells are dropped.
    pub fn push(&mut self, mut row: Vec<Cell>) {
        row.resize(self.columns.len(), Cell::default());
        self.rows.push(row);
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self, render: Render) -> String {
        let widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                self.rows
                    .iter()
                    .map(|row| chars(&row[i].text))
                    .chain([chars(name)])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let header: Vec<Cell> =
            self.columns.iter().map(|(name, _)| Cell::styled(name.clone(), Style::Bold)).collect();
        let mut out = String::new();
        for row in std::iter::once(&header).chain(&self.rows) {
            self.line(&mut out, row, &widths, render);
        }
        out
    }

    fn line(&self, out: &mut String, row: &[Cell], widths: &[usize], render: Render) {
        let last = self.columns.len().saturating_sub(1);
        let mut used = 0;
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str(GAP);
                used += GAP.len();
            }
            let mut text = cell.text.clone();
            if i == last
                && let Some(limit) = render.width
            {
                text = cut(&text, limit.saturating_sub(used));
            }
            let pad = if i == last { 0 } else { widths[i].saturating_sub(chars(&text)) };
            let (before, after) = match self.columns[i].1 {
                Align::Left => (0, pad),
                Align::Right => (pad, 0),
            };
            line.extend(std::iter::repeat_n(' ', before));
            match (render.colour, cell.style.code()) {
                (true, Some(code)) if !text.is_empty() => {
                    let _ = write!(line, "\x1b[{code}m{text}\x1b[0m");
                }
                _ => line.push_str(&text),
            }
            line.extend(std::iter::repeat_n(' ', after));
            used += before + chars(&text) + after;
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

fn chars(text: &str) -> usize {
    text.chars().count()
}

/// `text` in at most `room` characters, the last one `…` when it was cut.
fn cut(text: &str, room: usize) -> String {
    if chars(text) <= room {
        return text.to_owned();
    }
    match room {
        0 => String::new(),
        _ => text.chars().take(room - 1).chain(['…']).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        let mut table =
            Table::new(&[("NODE", Align::Left), ("SCORE", Align::Right), ("WHY", Align::Left)]);
        table.push(vec!["a".into(), "7".into(), Cell::styled("cpu 71% > 65%", Style::Red)]);
        table.push(vec!["longer-name".into(), "100".into(), "".into()]);
        table
    }

    #[test]
    fn columns_are_aligned_and_numbers_right_aligned() {
        let text = sample().render(Render::default());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "NODE         SCORE  WHY");
        assert_eq!(lines[1], "a                7  cpu 71% > 65%");
        assert_eq!(lines[2], "longer-name    100");
    }

    #[test]
    fn colour_codes_only_when_asked() {
        assert!(!sample().render(Render { colour: false, width: None }).contains('\x1b'));
        let coloured = sample().render(Render { colour: true, width: None });
        assert!(coloured.contains("\x1b[31mcpu 71% > 65%\x1b[0m"), "{coloured}");
        assert!(coloured.contains("\x1b[1mNODE\x1b[0m"), "{coloured}");
    }

    #[test]
    fn the_last_column_is_cut_to_the_width() {
        let text = sample().render(Render { colour: false, width: Some(26) });
        let line = text.lines().nth(1).unwrap();
        assert_eq!(line, "a                7  cpu 7…");
        assert_eq!(line.chars().count(), 26);
        assert!(text.lines().all(|l| l.chars().count() <= 26), "{text}");
    }

    #[test]
    fn short_rows_are_padded_with_blank_cells() {
        let mut table = Table::new(&[("A", Align::Left), ("B", Align::Left)]);
        table.push(vec!["x".into()]);
        assert_eq!(table.render(Render::default()), "A  B\nx\n");
    }

    #[test]
    fn colour_is_for_terminals_unless_forced() {
        use ColourChoice::*;
        assert!(colour_enabled(Auto, true, false, false));
        assert!(!colour_enabled(Auto, false, false, false));
        assert!(!colour_enabled(Auto, true, true, false), "NO_COLOR wins on a terminal");
        assert!(!colour_enabled(Auto, true, false, true), "TERM=dumb");
        assert!(colour_enabled(Always, false, true, true));
        assert!(!colour_enabled(Never, true, false, false));
    }

    #[test]
    fn width_is_limited_on_a_terminal_only() {
        assert_eq!(width_limit(true, Some(120)), Some(120));
        assert_eq!(width_limit(false, Some(120)), None);
        assert_eq!(width_limit(true, None), None);
        assert_eq!(width_limit(true, Some(0)), None);
    }
}
