//! `spindle triggers`: the server's triggers (events from other systems that start
//! requests) with their latest deliveries.

use super::*;

pub(crate) async fn triggers(args: &ClientArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let triggers = text_of!(args, client.triggers().await);
    if triggers.is_empty() {
        super::eprintln_line("no triggers (the Request Manager's config `triggers:` adds them)")?;
        return Ok(Exit::Success);
    }
    for (at, trigger) in triggers.iter().enumerate() {
        if at > 0 {
            out!("");
        }
        let args: Vec<String> = trigger
            .args
            .iter()
            .map(|(arg, from)| match from.strip_prefix('=') {
                Some(fixed) => format!("{arg}={fixed}"),
                None => format!("{arg}<-{from}"),
            })
            .collect();
        out!(
            "{}  starts {} ({}), proven by {}, delivery id from {}",
            trigger.name,
            trigger.request,
            if args.is_empty() {
                "no args".to_owned()
            } else {
                args.join(" ")
            },
            trigger.auth,
            trigger.delivery
        );
        if trigger.deliveries.is_empty() {
            out!("  no deliveries yet");
        }
        for delivery in &trigger.deliveries {
            out!(
                "  {}  {}  {}",
                time(Some(delivery.received_at)),
                delivery.request_id,
                squeeze(&delivery.delivery_id, 60)
            );
        }
    }
    Ok(Exit::Success)
}
