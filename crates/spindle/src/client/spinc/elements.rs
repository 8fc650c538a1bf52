//! `elements ID [--node N] [--state S]`: each element of a request's `each:` expansions
//! with its wave, state, tries and runtime (issue #50).

use super::*;

pub(crate) async fn elements(
    args: &ClientArgs,
    id: &str,
    node: Option<&str>,
    state: Option<&str>,
) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let elements = text_of!(args, client.elements(id, node, state).await);
    if elements.is_empty() {
        super::eprintln_line(match (node, state) {
            (None, None) => "the request expands no node over a list (`each:`)",
            _ => "no element is in that state",
        })?;
        return Ok(Exit::Success);
    }
    let width = |text: fn(&proto::ElementStatus) -> &str, at_least: usize| {
        elements
            .iter()
            .map(|e| text(e).chars().count())
            .max()
            .unwrap_or(0)
            .max(at_least)
    };
    let (node_width, name_width) = (width(|e| &e.node, 4), width(|e| &e.name, 7));
    out!(
        "{:<node_width$} {:<name_width$} {:>4}  {:<9} {:>5} {:<9} FIRST JOB",
        "NODE",
        "ELEMENT",
        "WAVE",
        "STATE",
        "TRIES",
        "RUNTIME"
    );
    let now = Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    for element in &elements {
        let wave = if element.wave == 0 {
            String::new()
        } else {
            element.wave.to_string()
        };
        let ran = match (element.started_at, element.finished_at) {
            (0, _) => String::new(),
            (started, 0) => runtime(chrono::Duration::nanoseconds(now - started)),
            (started, finished) => runtime(chrono::Duration::nanoseconds(finished - started)),
        };
        out!(
            "{:<node_width$} {:<name_width$} {:>4}  {:<9} {:>5} {:<9} {}",
            element.node,
            element.name,
            wave,
            element.state.name(),
            element.tries,
            ran,
            element.jobs.first().map_or("", String::as_str)
        );
    }
    Ok(Exit::Success)
}
