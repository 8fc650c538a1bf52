//! `watch`: a request's progress and running jobs until it ends.

use super::*;

/// `watch <id>`: a live progress bar and the running jobs until the request ends;
/// exit 0 for COMPLETE, 1 for FAIL, 3 for STOPPED.
pub(crate) async fn watch(args: &ClientArgs, id: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} jobs  {wide_msg}",
        )
        .expect("the template is valid"),
    );
    let request = loop {
        let request = match client.request(id).await {
            Ok(request) => request,
            Err(err) => {
                bar.finish_and_clear();
                return Ok(fail(&err));
            }
        };
        let (complete, all) = super::job_counts(&request);
        bar.set_length(all);
        bar.set_position(complete);
        if request.state.is_finished() {
            break request;
        }
        // What a PENDING request waits for (a lock its type declares, a runner).
        if request.state == State::Pending && !request.error.is_empty() {
            bar.set_message(request.error.clone());
        } else if let Ok(status) = client.running(Some(id)).await {
            let line = running_line(&status.jobs);
            bar.set_message(if request.paused {
                format!("paused (spindle resume {id}) {line}")
            } else {
                line
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    bar.finish_and_clear();
    if args.output() == Output::Json {
        print_json(&Request {
            job_chain: None,
            ..request.clone()
        })?;
    } else {
        out!("{} {}", request.id, state_text(request.state, 0));
        std::io::stdout().flush()?;
        if request.state == State::Fail
            && let Ok(job_log) = client.job_log(&request.id).await
        {
            let chain = client.job_chain(&request.id).await.ok();
            eprint_block(&crate::client::explain::explain(
                &request.id,
                &job_log,
                chain.as_ref(),
                crate::client::explain::WholeLog::Server,
            ))?;
        }
    }
    Ok(match request.state {
        State::Complete => Exit::Success,
        State::Stopped => Exit::Stopped,
        _ => Exit::Failure,
    })
}
