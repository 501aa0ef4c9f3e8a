//! `subscriptions/listen` of a 2026-07-28 client, at both doors (docs/design.md
//! §14, "Listen streams"): what of a client's filter the gateway honours (the
//! fleet's list changes always; a resource's updates when the server that
//! offers it takes subscriptions), and the stream itself, which hears what it
//! asked for from the gateway's task until the client closes or cancels it.
//! A stream is a subscriber of its resources for as long as it is open, in the
//! same counts as legacy sessions (`subscriptions.rs`).

use rmcp::model::{ResourceUpdatedNotification, ServerNotification, SubscriptionFilter};
use rmcp::service::{SubscriptionContext, SubscriptionSendError};
use tokio::sync::mpsc;

use super::aggregate::Gateway;
use super::bounds::LISTENS;
use super::clients::Note;
use super::desk::Listen;
use super::member::Scope;

/// What of `requested` the gateway honours for a client that sees `scope`:
/// every list change it asks for, and the resources whose server takes
/// subscriptions; nothing once [`LISTENS`] streams are open (the stream is
/// then refused).
pub(super) fn honoured(gateway: &Gateway, scope: &Scope, requested: &SubscriptionFilter) -> SubscriptionFilter {
    if gateway.listening() >= LISTENS {
        return SubscriptionFilter::default();
    }
    let asked = |flag: Option<bool>| (flag == Some(true)).then_some(true);
    let uris: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|uri| gateway.subscribable_now(scope, uri).is_some())
        .cloned()
        .collect();
    let mut honoured = SubscriptionFilter::default();
    honoured.tools_list_changed = asked(requested.tools_list_changed);
    honoured.prompts_list_changed = asked(requested.prompts_list_changed);
    honoured.resources_list_changed = asked(requested.resources_list_changed);
    honoured.resource_subscriptions = (!uris.is_empty()).then_some(uris);
    honoured
}

/// A listen stream refused: [`LISTENS`] are open.
pub(super) struct Busy;

/// Runs one listen stream (acknowledged by rmcp with what [`honoured`] gave)
/// until the client closes or cancels it; then what it alone subscribed to is
/// unsubscribed at the servers.
pub(super) async fn listen(gateway: &Gateway, scope: &Scope, context: SubscriptionContext) -> Result<(), Busy> {
    let accepted = context.accepted().clone();
    let uris: Vec<(usize, String)> = accepted
        .resource_subscriptions
        .iter()
        .flatten()
        .filter_map(|uri| Some((gateway.subscribable_now(scope, uri)?, uri.clone())))
        .collect();
    let (queue, mut heard) = mpsc::unbounded_channel();
    let listen = Listen {
        scope: scope.clone(),
        tools: accepted.tools_list_changed == Some(true),
        prompts: accepted.prompts_list_changed == Some(true),
        resources: accepted.resources_list_changed == Some(true),
        uris,
        queue,
    };
    let Some((_open, first)) = gateway.listen(listen).await else {
        return Err(Busy);
    };
    for (index, uri) in first {
        gateway.subscribe_for_listen(index, &uri).await;
    }
    let sink = context.sink().clone();
    loop {
        let note = tokio::select! {
            () = context.cancelled() => break,
            note = heard.recv() => note,
        };
        let sent = match note {
            None => break,
            Some(Note::ToolsChanged) => sink.notify_tool_list_changed().await,
            Some(Note::PromptsChanged) => sink.notify_prompt_list_changed().await,
            Some(Note::ResourcesChanged) => sink.notify_resource_list_changed().await,
            Some(Note::ResourceUpdated(param)) => {
                sink.send(ServerNotification::ResourceUpdatedNotification(
                    ResourceUpdatedNotification::new(param),
                ))
                .await
            }
            Some(Note::Progress(_) | Note::Log(_) | Note::TaskStatus(_)) => Ok(()),
        };
        match sent {
            Err(SubscriptionSendError::SubscriptionClosed | SubscriptionSendError::Service(_)) => break,
            Err(e) => tracing::debug!(error = %e, "a listen stream did not take a notification"),
            Ok(()) => {}
        }
    }
    Ok(())
}
