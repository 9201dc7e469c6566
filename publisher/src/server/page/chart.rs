//! Small inline SVG charts of a list's build history: one value per build,
//! reduced to the chart's pixel columns (the least and greatest value of
//! each), so that a chart of 1,000 builds is as small as one of 100.

use std::fmt::Write as _;

/// Chart width in pixels (one path point pair per column at most).
pub(super) const WIDTH: u32 = 160;
/// Chart height in pixels.
pub(super) const HEIGHT: u32 = 40;

/// The least and greatest value of each pixel column of `points`
/// ((Unix seconds, value), oldest first, non-finite values left out),
/// spread over `width` columns in build order (builds follow a schedule,
/// so order is time; several builds in one second still spread out):
/// `(column, least, greatest)`.
pub(super) fn columns(points: &[(u64, f64)], width: u32) -> Vec<(u32, f64, f64)> {
    let values: Vec<f64> = points.iter().map(|p| p.1).filter(|v| v.is_finite()).collect();
    let last = values.len().saturating_sub(1).max(1) as f64;
    let last_column = width.saturating_sub(1);
    let mut out: Vec<(u32, f64, f64)> = Vec::with_capacity(values.len().min(width as usize));
    for (i, &v) in values.iter().enumerate() {
        let column = ((i as f64 / last) * f64::from(last_column)).round() as u32;
        match out.last_mut() {
            Some(c) if c.0 == column => {
                c.1 = c.1.min(v);
                c.2 = c.2.max(v);
            }
            _ => out.push((column.min(last_column), v, v)),
        }
    }
    out
}

/// An SVG chart of `points` titled `title` (escaped by the caller), its
/// last value `last` shown beside it: a line through each column's least
/// and greatest value, scaled to their range.
pub(super) fn svg(title: &str, last: &str, points: &[(u64, f64)]) -> String {
    let columns = columns(points, WIDTH);
    let (lo, hi) = columns
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
            (lo.min(c.1), hi.max(c.2))
        });
    let top = 2.0;
    let usable = f64::from(HEIGHT) - 2.0 * top;
    // Whole pixels: the chart is drawn at its size, so nothing finer shows.
    // A flat series is drawn across the middle.
    let y = |v: f64| -> i64 {
        let at = if hi > lo {
            top + usable - (v - lo) / (hi - lo) * usable
        } else {
            f64::from(HEIGHT) / 2.0
        };
        at.round() as i64
    };
    // Each column's least and greatest, as points; a point between two at
    // its height adds nothing to the line.
    let points: Vec<(u32, i64)> = columns
        .iter()
        .flat_map(|&(x, least, greatest)| [(x, y(least)), (x, y(greatest))])
        .collect();
    let mut path = String::with_capacity(columns.len() * 12);
    let mut at: Option<(u32, i64)> = None;
    for (i, &(x, py)) in points.iter().enumerate() {
        let next = points.get(i + 1);
        let flat_through = at.is_some_and(|a| a.1 == py) && next.is_some_and(|n| n.1 == py);
        if flat_through || at == Some((x, py)) {
            continue;
        }
        let _ = match at {
            None => write!(path, "M{x} {py}"),
            Some((ax, _)) if ax == x => write!(path, "V{py}"),
            Some((_, ay)) if ay == py => write!(path, "H{x}"),
            Some(_) => write!(path, "L{x} {py}"),
        };
        at = Some((x, py));
    }
    if columns.len() == 1 {
        // One build: a dot, drawn as a short line.
        let _ = write!(path, "h1");
    }
    format!(
        "<figure><figcaption>{title} <b>{last}</b></figcaption>\
         <svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"{title}\">\
         <path d=\"{path}\"/></svg></figure>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_points_reduce_to_one_pair_per_column() {
        let points: Vec<(u64, f64)> = (0..1_000u64).map(|i| (i * 1800, (i % 7) as f64)).collect();
        let c = columns(&points, WIDTH);
        assert_eq!(c.len(), WIDTH as usize);
        assert_eq!(c.first().map(|c| c.0), Some(0));
        assert_eq!(c.last().map(|c| c.0), Some(WIDTH - 1));
        // Each column of about six builds spans their least and greatest.
        assert!(c.iter().all(|c| c.1 <= c.2 && c.2 <= 6.0));
        let chart = svg("entries", "6", &points);
        assert!(chart.len() < WIDTH as usize * 12 + 300, "{} bytes", chart.len());
        // A flat series: one horizontal line across the middle.
        let flat: Vec<(u64, f64)> = (0..1_000u64).map(|i| (i * 1800, 5.0)).collect();
        assert!(svg("x", "5", &flat).contains(&format!("d=\"M0 20H{}\"", WIDTH - 1)));
    }

    #[test]
    fn few_or_odd_points_still_draw() {
        assert!(columns(&[], 240).is_empty());
        assert_eq!(columns(&[(5, 1.0)], 240), [(0, 1.0, 1.0)]);
        assert_eq!(columns(&[(5, f64::NAN), (6, 2.0)], 240), [(0, 2.0, 2.0)]);
        // Builds in the same second still spread out, in order.
        assert_eq!(
            columns(&[(5, 1.0), (5, 3.0)], 240),
            [(0, 1.0, 1.0), (239, 3.0, 3.0)]
        );
        assert_eq!(
            columns(&[(5, 1.0), (5, 3.0), (6, 2.0)], 3),
            [(0, 1.0, 1.0), (1, 3.0, 3.0), (2, 2.0, 2.0)]
        );
        assert!(svg("x", "1", &[(5, 1.0)]).contains("h1"));
    }
}
