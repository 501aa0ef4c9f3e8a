//! Plain-text tables: a header row and rows, each column as wide as its widest
//! cell (counted in characters), two spaces between columns, no trailing blanks.

/// The width of each column of `rows`.
pub(crate) fn widths<const N: usize>(rows: &[[String; N]]) -> [usize; N] {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    widths
}

/// One row laid out in `widths`, with its newline.
pub(crate) fn line<const N: usize>(row: &[String; N], widths: [usize; N]) -> String {
    let cells: Vec<String> = row
        .iter()
        .zip(widths)
        .map(|(cell, w)| format!("{cell:<w$}"))
        .collect();
    let mut out = cells.join("  ").trim_end().to_owned();
    out.push('\n');
    out
}

/// Every row of `rows`, the first being the header.
pub(crate) fn render<const N: usize>(rows: &[[String; N]]) -> String {
    let widths = widths(rows);
    rows.iter().map(|row| line(row, widths)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let rows = [
            ["SERVER".to_owned(), "TOOL".to_owned(), "DESCRIPTION".to_owned()],
            ["a-very-long-server-name".to_owned(), "x".to_owned(), "".to_owned()],
            ["é".to_owned(), "read_file".to_owned(), "Reads".to_owned()],
        ];
        assert_eq!(
            render(&rows),
            "SERVER                   TOOL       DESCRIPTION\n\
             a-very-long-server-name  x\n\
             é                        read_file  Reads\n"
        );
    }
}
