//! The group commit: one transaction for a batch of creates, starts, job log entries,
//! progress and ends gathered from many callers.

use super::*;

impl<DB: Backend> SqlStore<DB> {
    // Long because the group commit is one transaction for every kind of write gathered
    // (deliveries, creates with their secrets and locks, starts, job log entries,
    // progress, ends), in the order that keeps each report's fence check before its
    // write; each kind is a short loop over the batch.
    pub(crate) async fn write_batch(&self, batch: &WriteBatch) -> Result<BatchWritten, Error> {
        let mut tx = self.pool.begin().await?;
        let mut refused = Vec::new();
        // The refused (request, fence) pairs: each report is judged by its own fence.
        let mut barred: std::collections::HashSet<(&str, &Fence)> =
            std::collections::HashSet::new();
        let fences = batch.fences();
        if !fences.is_empty() {
            let mut ids: Vec<&str> = fences.iter().map(|(id, _)| *id).collect();
            ids.sort_unstable();
            ids.dedup();
            // The owners' rows locked, as a try start's are: a recovery or hand-over of
            // one of them waits for this batch, or this sees its new owner and writes
            // none of the old one's reports.
            let owners = Self::owners_in(&mut tx, &ids, DB::LOCK_ROWS).await?;
            for (request_id, fence) in fences {
                let refusal = match owners.get(request_id) {
                    None => Error::not_found("request", request_id),
                    Some(owner) if !owner.accepts(fence) => owner.refusal(request_id, fence),
                    Some(_) => continue,
                };
                barred.insert((request_id, fence));
                refused.push((request_id.to_owned(), fence.clone(), refusal));
            }
        }
        // A trigger's delivery is claimed first: one sent again stores nothing.
        let mut duplicates = Vec::with_capacity(batch.creates.len());
        for new in &batch.creates {
            duplicates.push(match &new.delivery {
                Some(delivery) => {
                    Self::claim_delivery_in(
                        &mut tx,
                        delivery,
                        &new.request.id,
                        new.request.created_at,
                    )
                    .await?
                }
                None => None,
            });
        }
        let creates: Vec<_> = batch
            .creates
            .iter()
            .zip(&duplicates)
            .filter(|(_, duplicate)| duplicate.is_none())
            .map(|(new, _)| {
                let archived = (&new.request, &new.create_request, new.chain_json.as_ref());
                (archived, new.created.as_ref())
            })
            .collect();
        if !creates.is_empty() {
            Self::create_in(&mut tx, &creates).await?;
        }
        // Secret args, sealed, with their request.
        for (new, duplicate) in batch.creates.iter().zip(&duplicates) {
            if duplicate.is_some() {
                continue;
            }
            for (name, sealed) in &new.secrets {
                Statement::new(
                    "INSERT INTO request_secrets (request_id, name, sealed) VALUES ($1, $2, $3)",
                )
                .bind(new.request.id.as_str())
                .bind(name.as_str())
                .bind(sealed.as_str())
                .execute(&mut tx)
                .await?;
            }
        }
        // Each new request's locks, in the transaction that stores it.
        let mut locked = Vec::with_capacity(batch.creates.len());
        for (new, duplicate) in batch.creates.iter().zip(&duplicates) {
            locked.push(if new.locks.is_empty() || duplicate.is_some() {
                None
            } else {
                let now = Utc::now();
                let created = Some(new.request.created_at);
                Some(
                    Self::take_locks_in(
                        &mut tx,
                        &new.request.id,
                        "",
                        &new.locks,
                        new.priority,
                        now,
                        created,
                    )
                    .await?,
                )
            });
        }
        let started = if batch.starts.is_empty() {
            Vec::new()
        } else {
            Self::start_in(&mut tx, &batch.starts).await?
        };
        let logs: std::borrow::Cow<'_, [JobLog]> = if barred.is_empty() {
            (&batch.logs[..]).into()
        } else {
            let mut kept = vec![true; batch.logs.len()];
            for (run, fence) in &batch.log_fences {
                for (at, entry) in batch.logs.iter().enumerate().take(run.end).skip(run.start) {
                    if barred.contains(&(entry.request_id.as_str(), fence)) {
                        kept[at] = false;
                    }
                }
            }
            batch
                .logs
                .iter()
                .zip(kept)
                .filter(|(_, kept)| *kept)
                .map(|(entry, _)| entry.clone())
                .collect::<Vec<_>>()
                .into()
        };
        if !logs.is_empty() {
            Self::insert_logs_in(&mut tx, &logs).await?;
        }
        let progress: Vec<(&str, u64)> = batch
            .progress
            .iter()
            .filter(|(id, _, fence)| {
                fence
                    .as_ref()
                    .is_none_or(|fence| !barred.contains(&(id.as_str(), fence)))
            })
            .map(|(id, n, _)| (id.as_str(), *n))
            .collect();
        if !progress.is_empty() {
            Self::progress_in(&mut tx, &progress).await?;
        }
        let finished = if batch.finishes.is_empty() {
            Vec::new()
        } else {
            Self::finish_in(&mut tx, &batch.finishes).await?
        };
        let suspends = if batch.suspends.is_empty() {
            Vec::new()
        } else {
            Self::suspends_in(&mut tx, &batch.suspends).await?
        };
        let handed = if batch.hand_overs.is_empty() {
            Vec::new()
        } else {
            Self::hand_overs_in(&mut tx, &batch.hand_overs).await?
        };
        let resumes = if batch.resumes.is_empty() {
            Vec::new()
        } else {
            Self::resumes_in(&mut tx, &batch.resumes).await?
        };
        tx.commit().await?;
        let mut resumed = Vec::with_capacity(resumes.len());
        for (done, resume) in resumes.into_iter().zip(&batch.resumes) {
            let request_id = resume.request_id.as_str();
            resumed.push(match done {
                suspended::Resumed::Now(paused) => Ok(paused),
                suspended::Resumed::NotClaimed => Err(Error::Conflict(format!(
                    "the suspended job chain of request {request_id} is not claimed by {}",
                    resume.host
                ))),
                suspended::Resumed::Moved => {
                    Err(self.state_error(request_id, State::Suspended).await)
                }
            });
        }
        let handed = handed
            .into_iter()
            .zip(&batch.hand_overs)
            .map(|(done, record)| done.into_result(record))
            .collect();
        Ok(BatchWritten {
            suspended: suspends,
            handed,
            started,
            finished,
            refused,
            locked,
            duplicates,
            resumed,
        })
    }
}
