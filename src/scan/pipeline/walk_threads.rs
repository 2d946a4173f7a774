//! The walk's threads: `runtime_events` read, decoded and walked, on one thread, with a
//! decoder beside it, or beside a reader on its own connection.

use std::sync::Arc;

use super::header_briefs::HeaderBriefs;
use super::store::Store;
use super::ROWS_QUEUED;
use crate::db::{DbError, Workspace};
use crate::scan::{EventBatch, EventHasher, Walker};
/// Streams `runtime_events` into the walker, decoding payloads (most of a scan's work)
/// on a second thread while this one reads and walks; see [`Pipeline`].
pub(super) fn walk_events<'scope>(
    ws: &Workspace,
    walker: &mut Walker,
    store: &mut Store<'_>,
    scope: &'scope std::thread::Scope<'scope, '_>,
    at_decoder: Option<usize>,
    progress: &mut dyn FnMut(u64),
) -> Result<(), DbError> {
    let (to_decoder, decoder_rx) = std::sync::mpsc::channel::<EventBatch>();
    let (decoder_tx, from_decoder) = std::sync::mpsc::channel::<EventBatch>();
    let rules = walker.rules();
    let ids = walker.event_hasher();
    // With a decoder thread, it also compares the closed operations with the stored
    // projection's digests (most of that is hashing): the walk's thread is the busier.
    let digests = at_decoder.and(store.digests.clone());
    // And it judges closed runs against their header briefs.
    let briefs = at_decoder.and(store.briefs.clone());
    let decoder = at_decoder.map(|_| {
        let (ids, digests, briefs) = (ids.clone(), digests.clone(), briefs.clone());
        std::thread::Builder::new()
            .name("decode".into())
            .spawn_scoped(scope, move || {
                for mut b in decoder_rx {
                    b.decode(&rules, &ids);
                    if let Some(d) = &digests {
                        b.check_projections(d);
                    }
                    if let Some(h) = &briefs {
                        b.check_runs(|s, r| h.get(s, r));
                    }
                    if decoder_tx.send(b).is_err() {
                        break;
                    }
                }
            })
    });
    let mut n = 0u64;
    let (Some(Ok(decoder)), Some(max_at_decoder)) = (decoder, at_decoder) else {
        // Asked for, or no thread to be had: decode here, row by row.
        ws.for_each_event_ref(|row| {
            if store.gone.session(&row.session_id) {
                return Ok(());
            }
            walker.push_row(row, store)?;
            n += 1;
            if n.is_multiple_of(4096) {
                progress(n);
            }
            Ok(())
        })?;
        progress(n);
        return Ok(());
    };
    if digests.is_some() {
        walker.defer_projection_checks();
    }
    if briefs.is_some() {
        walker.defer_run_checks();
    }
    let mut pipe = Pipeline {
        to_decoder,
        from_decoder,
        queue: std::collections::VecDeque::new(),
        at_decoder: 0,
        max_at_decoder,
        spare: Vec::new(),
        rules,
        ids,
        digests,
        briefs,
    };
    let mut batch = EventBatch::default();
    let mut alive = true;
    ws.for_each_event_raw(|row, payload| {
        if !alive || store.gone.stored_session(&row.ids[1]) {
            return Ok(());
        }
        batch.push(row, payload);
        n += 1;
        if n.is_multiple_of(4096) {
            progress(n);
        }
        if batch.is_full() {
            let next = pipe.spare.pop().unwrap_or_default();
            alive = pipe.submit(std::mem::replace(&mut batch, next), walker, store)?;
        }
        Ok(())
    })?;
    if alive && !batch.is_empty() {
        alive = pipe.submit(batch, walker, store)?;
    }
    if alive {
        alive = pipe.drain(walker, store)?;
    }
    if !alive {
        // Only a panic stops the decoder early: re-raise it here.
        drop(pipe);
        if let Err(p) = decoder.join() {
            std::panic::resume_unwind(p);
        }
        return Err(DbError::Io {
            path: ws.path().to_path_buf(),
            source: std::io::Error::other("the decoding thread stopped early"),
        });
    }
    progress(n);
    Ok(())
}

/// Streams `runtime_events` into the walker with the rows read on `reader` (a second
/// connection on the same data) by a thread of their own. On Maka's bench workspace
/// SQLite's page reads are most of the walking thread's time when it reads too; here
/// it decodes and walks. The reading thread decodes a batch itself only while
/// `decode_behind` or more wait to be walked, so that both cores stay busy whichever
/// side is slower. `false` when it could not start a thread (nothing was walked).
pub(super) fn walk_beside_reader<'scope, 'env>(
    reader: Workspace,
    decode_behind: usize,
    walker: &mut Walker,
    store: &mut Store<'env>,
    scope: &'scope std::thread::Scope<'scope, 'env>,
    progress: &mut dyn FnMut(u64),
) -> Result<bool, DbError> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let rules = walker.rules();
    let ids = walker.event_hasher();
    // A batch, and whether it is decoded.
    let (tx, rx) =
        std::sync::mpsc::sync_channel::<Result<(EventBatch, bool), DbError>>(ROWS_QUEUED);
    let (spare_tx, spare_rx) = std::sync::mpsc::channel::<EventBatch>();
    let waiting = Arc::new(AtomicUsize::new(0));
    let thread = {
        let (waiting, ids, gone) = (waiting.clone(), ids.clone(), store.gone);
        move || {
            let mut batch = EventBatch::default();
            let send = |mut b: EventBatch| {
                let decoded = waiting.load(Ordering::Relaxed) >= decode_behind;
                if decoded {
                    b.decode(&rules, &ids);
                }
                waiting.fetch_add(1, Ordering::Relaxed);
                tx.send(Ok((b, decoded))).is_ok()
            };
            let read = reader.for_each_event_raw(|row, payload| {
                if gone.stored_session(&row.ids[1]) {
                    return Ok(());
                }
                batch.push(row, payload);
                if batch.is_full() {
                    let next = spare_rx.try_recv().unwrap_or_default();
                    if !send(std::mem::replace(&mut batch, next)) {
                        // The walk stopped on an error of its own: so does this.
                        return Err(DbError::Io {
                            path: reader.path().to_path_buf(),
                            source: std::io::Error::other("the scan stopped"),
                        });
                    }
                }
                Ok(())
            });
            match read {
                Ok(()) if !batch.is_empty() => {
                    send(batch);
                }
                Ok(()) => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        }
    };
    let Ok(handle) = std::thread::Builder::new()
        .name("read-rows".into())
        .spawn_scoped(scope, thread)
    else {
        // No thread to be had: the caller reads the rows itself.
        return Ok(false);
    };
    let mut n = 0u64;
    for msg in rx.iter() {
        let (mut b, decoded) = msg?;
        waiting.fetch_sub(1, Ordering::Relaxed);
        if !decoded {
            b.decode(&rules, &ids);
        }
        n += b.len() as u64;
        progress(n);
        walker.push_batch(&mut b, store)?;
        let _ = spare_tx.send(b);
    }
    if let Err(p) = handle.join() {
        std::panic::resume_unwind(p);
    }
    progress(n);
    Ok(true)
}

/// Batches of rows between reading and walking. Each full batch goes to the decoder
/// thread while it has fewer than `max_at_decoder` (four by default), and is otherwise
/// decoded here, so that both cores stay busy whichever side is slower; batches are
/// walked in read order. At most [`Pipeline::QUEUE`] batches wait, so memory stays
/// bounded.
struct Pipeline {
    to_decoder: std::sync::mpsc::Sender<EventBatch>,
    from_decoder: std::sync::mpsc::Receiver<EventBatch>,
    /// In read order; `None` while the decoder has it (it returns them in order).
    queue: std::collections::VecDeque<Option<EventBatch>>,
    at_decoder: usize,
    max_at_decoder: usize,
    spare: Vec<EventBatch>,
    rules: crate::release::Rules,
    ids: EventHasher,
    /// Set when the walk defers its projection checks to where batches are decoded.
    digests: Option<Arc<crate::scan::projection::StoredDigests>>,
    /// Likewise its run checks (see [`Walker::defer_run_checks`]).
    briefs: Option<Arc<HeaderBriefs>>,
}

impl Pipeline {
    const QUEUE: usize = 4;

    /// Hands a full batch on. `false`: the decoder is gone (it panicked).
    fn submit(
        &mut self,
        mut batch: EventBatch,
        walker: &mut Walker,
        store: &mut Store<'_>,
    ) -> Result<bool, DbError> {
        if !self.receive(false) {
            return Ok(false);
        }
        self.walk_ready(walker, store)?;
        // The operations closed so far ride with this batch, which is walked after
        // every batch that carried older ones.
        if self.digests.is_some() {
            batch.carry_checks(walker.take_projection_checks());
        }
        if self.briefs.is_some() {
            batch.carry_runs(walker.take_run_checks());
        }
        if self.at_decoder < self.max_at_decoder {
            if self.to_decoder.send(batch).is_err() {
                return Ok(false);
            }
            self.at_decoder += 1;
            self.queue.push_back(None);
        } else {
            batch.decode(&self.rules, &self.ids);
            if let Some(d) = &self.digests {
                batch.check_projections(d);
            }
            if let Some(h) = &self.briefs {
                batch.check_runs(|s, r| h.get(s, r));
            }
            self.queue.push_back(Some(batch));
        }
        while self.queue.len() > Self::QUEUE {
            if !self.receive(true) {
                return Ok(false);
            }
            self.walk_ready(walker, store)?;
        }
        Ok(true)
    }

    /// Walks every batch left. `false`: the decoder is gone.
    fn drain(&mut self, walker: &mut Walker, store: &mut Store<'_>) -> Result<bool, DbError> {
        while !self.queue.is_empty() {
            self.walk_ready(walker, store)?;
            if !self.queue.is_empty() && !self.receive(true) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Takes what the decoder has finished (at least one batch when `wait`). `false`:
    /// the decoder is gone.
    fn receive(&mut self, wait: bool) -> bool {
        use std::sync::mpsc::TryRecvError;
        let mut wait = wait && self.at_decoder > 0;
        while self.at_decoder > 0 {
            let b = if wait {
                match self.from_decoder.recv() {
                    Ok(b) => b,
                    Err(_) => return false,
                }
            } else {
                match self.from_decoder.try_recv() {
                    Ok(b) => b,
                    Err(TryRecvError::Empty) => return true,
                    Err(TryRecvError::Disconnected) => return false,
                }
            };
            wait = false;
            self.at_decoder -= 1;
            // There are as many empty slots as batches at the decoder.
            let slot = self.queue.iter_mut().find(|s| s.is_none());
            debug_assert!(slot.is_some());
            if let Some(slot) = slot {
                *slot = Some(b);
            }
        }
        true
    }

    /// Walks the decoded batches at the front.
    fn walk_ready(&mut self, walker: &mut Walker, store: &mut Store<'_>) -> Result<(), DbError> {
        while let Some(Some(_)) = self.queue.front() {
            let Some(Some(mut b)) = self.queue.pop_front() else {
                break;
            };
            walker.settle_batch_checks(&mut b, store)?;
            walker.push_batch(&mut b, store)?;
            self.spare.push(b);
        }
        Ok(())
    }
}
