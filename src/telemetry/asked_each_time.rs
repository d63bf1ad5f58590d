//! A per-layer filter whose callsites are asked each time a span or event is made.
//!
//! `tracing-subscriber` hands a per-layer filter's decision from `enabled` to `on_new_span` /
//! `on_event` through a thread-local bitmap. A callsite whose interest is cached as `always`
//! skips `enabled`, and then reads whatever the previous `enabled` call on that thread left
//! there. `log` records bridged by `tracing-log` call `enabled` without making anything (sqlx
//! asks `log::log_enabled!` after every query), so without this the next `always` span can be
//! left out of the trace layer, or an event out of the logs. Capping the interest at
//! `sometimes` makes every span and event ask first, so the bitmap it reads is its own
//! (tokio-rs/tracing#2519).

use tracing::subscriber::Interest;
use tracing::{Event, Metadata};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter};

/// `F`, whose callsites are never cached as `always`.
pub struct AskedEachTime<F>(pub F);

impl<S, F: Filter<S>> Filter<S> for AskedEachTime<F> {
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        self.0.enabled(meta, cx)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        let interest = self.0.callsite_enabled(meta);
        if interest.is_never() {
            interest
        } else {
            Interest::sometimes()
        }
    }

    fn event_enabled(&self, event: &Event<'_>, cx: &Context<'_, S>) -> bool {
        self.0.event_enabled(event, cx)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.0.max_level_hint()
    }

    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        id: &tracing::span::Id,
        ctx: Context<'_, S>,
    ) {
        self.0.on_new_span(attrs, id, ctx)
    }

    fn on_record(
        &self,
        id: &tracing::span::Id,
        values: &tracing::span::Record<'_>,
        ctx: Context<'_, S>,
    ) {
        self.0.on_record(id, values, ctx)
    }

    fn on_enter(&self, id: &tracing::span::Id, ctx: Context<'_, S>) {
        self.0.on_enter(id, ctx)
    }

    fn on_exit(&self, id: &tracing::span::Id, ctx: Context<'_, S>) {
        self.0.on_exit(id, ctx)
    }

    fn on_close(&self, id: tracing::span::Id, ctx: Context<'_, S>) {
        self.0.on_close(id, ctx)
    }
}
