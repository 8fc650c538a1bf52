//! A try runs only once its start is stored: one the Request Manager would not take
//! (the delivery given up on) does not run; it fails saying why, and the job's retries
//! apply, so nothing runs unseen by a recovery.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_try_whose_start_is_not_stored_does_not_run() {
    let (fakes, recorder) = (Arc::new(Fakes::default()), Arc::new(Recorder::default()));
    *fakes.recorder.lock().unwrap() = Some(Arc::clone(&recorder));
    fakes.durable.lock().unwrap().push("j2".to_owned());
    fakes.script("j2", vec![Step::Complete, Step::Complete]);
    *recorder.start_error.lock().unwrap() = Some(ReportError::failed(
        "500 Internal Server Error: storing failed",
    ));
    let mut c = chain("1>2");
    job(&mut c, "2").retry = 1;
    let end = start(c, &fakes, &recorder).wait().await;
    assert_eq!(end.state, State::Fail);
    // Neither try ran.
    assert!(
        !fakes.start_stored.lock().unwrap().contains_key("j2"),
        "j2 ran without its start stored"
    );
    assert_eq!(
        recorder.tries_of("j2"),
        [(1, State::Fail), (2, State::Fail)]
    );
    let errors: Vec<String> = recorder
        .logs
        .lock()
        .unwrap()
        .iter()
        .filter(|entry| entry.job_id == "j2")
        .map(|entry| entry.error.clone())
        .collect();
    for error in &errors {
        assert!(
            error.starts_with("not run: its start could not be stored (")
                && error.contains("storing failed"),
            "{errors:?}"
        );
    }
    assert_eq!(recorder.tries_of("j1"), [(1, State::Complete)]);
}
