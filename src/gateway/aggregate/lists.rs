//! What the gateway's catalog answers: each server's lists as last learned,
//! fetched again when a generation or a list changes, the exposed tools and
//! prompts and how their names route back, and what the servers of a scope
//! declare.

use super::*;

impl Gateway {
    /// Every server's items of one list (each server's as [`Gateway::list_of`]
    /// gives it), for the servers of `scope`.
    pub(in crate::gateway) async fn gather<T: Listing>(&self, scope: &Scope) -> Vec<(usize, Arc<Vec<T>>)> {
        let seen = |i: &usize| scope.as_ref().is_none_or(|s| s.contains(i));
        let fetches = (0..self.members().len())
            .filter(|i| self.member(*i).is_some())
            .filter(seen)
            .map(|index| self.list_of::<T>(index));
        futures::future::join_all(fetches)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// One server's items of one list, as last learned: fetched again (every
    /// page) from a running server whose generation changed or that announced a
    /// change; kept from its last generation for a server that is not running (a
    /// call starts it). An enabled server never seen running is started to learn
    /// what it offers, through its authority (G2).
    pub(in crate::gateway) async fn list_of<T: Listing>(&self, index: usize) -> Option<(usize, Arc<Vec<T>>)> {
        let member = self.member(index)?;
        let live = member.handle.serving_generation();
        let (ever, current, items, holding) = {
            let board = self.desk.board();
            // A slot the task has not yet made is a server never seen.
            match board.lists.get(index).map(T::known) {
                Some(known) => {
                    let current = known.fresh && known.generation == live;
                    let ever = known.generation.is_some();
                    (ever, current, known.items.clone(), board.holding)
                }
                None => (false, false, Arc::default(), board.holding),
            }
        };
        if current && live.is_some() {
            return Some((index, items));
        }
        if live.is_none() {
            let unknown = !ever && member.enabled && !holding;
            if !unknown || self.running(index).await.is_err() {
                return Some((index, items));
            }
        }
        let Some(reach) = member.handle.peer().await.ok().flatten() else {
            return Some((index, items));
        };
        let (generation, session) = (reach.generation, reach.session);
        let offered = session
            .peer()
            .peer_info()
            .is_some_and(|info| T::offered(&info.capabilities));
        let fetched = if offered {
            tokio::time::timeout(LIST_TIMEOUT, T::fetch(&session))
                .await
                .map_err(|_| "timed out".to_owned())
                .and_then(|r| r.map_err(|e| e.to_string()))
        } else {
            Ok(Vec::new())
        };
        let fetched = match fetched {
            Ok(items) => Arc::new(items),
            Err(error) => {
                tracing::warn!(server = member.handle.name(), %error, "listing failed");
                return Some((index, items));
            }
        };
        let known = Known {
            generation: Some(generation),
            fresh: true,
            items: fetched.clone(),
        };
        self.desk.learned(index, T::learnt(known)).await;
        Some((index, fetched))
    }

    /// Learns a server's lists as soon as a generation runs, so that they are
    /// known when it is stopped again (idle) before any client asked.
    pub(in crate::gateway) async fn prefetch(&self, index: usize) {
        self.list_of::<MemberTool>(index).await;
        self.list_of::<Prompt>(index).await;
        self.list_of::<Resource>(index).await;
        self.list_of::<ResourceTemplate>(index).await;
    }

    /// While the whole fleet goes down, calls do not start servers.
    pub(crate) async fn hold_starts(&self, hold: bool) {
        self.desk.hold(hold).await;
    }

    /// The exposed tools (renamed, filtered by each server's `tools:`) and how
    /// their names route back.
    /// `raw`: as the servers list them (a server's endpoint, docs/design.md §19).
    pub(in crate::gateway) async fn tools(&self, scope: &Scope, raw: bool) -> Arc<(Vec<MemberTool>, names::Names)> {
        self.named(scope, raw, |exposure, tool: &MemberTool| {
            names::passes(&tool.tool.name, &exposure.allow, &exposure.deny)
        })
        .await
    }

    /// The exposed prompts and how their names route back.
    pub(in crate::gateway) async fn prompts(&self, scope: &Scope, raw: bool) -> Arc<(Vec<Prompt>, names::Names)> {
        self.named(scope, raw, |_, _: &Prompt| true)
            .await
    }

    /// Every server's items that `keep` keeps, renamed `PREFIX__NAME` (G3).
    /// Building the names costs in proportion to every item of the fleet, and a
    /// call needs them to route one name: the last catalog built is kept and
    /// used again while every server's list and exposure are the same.
    /// `raw`: every item that `keep` keeps, under the name its server gave it.
    pub(super) async fn named<T: Listing + Named>(
        &self,
        scope: &Scope,
        raw: bool,
        keep: impl Fn(&Exposure, &T) -> bool,
    ) -> Arc<(Vec<T>, names::Names)> {
        let gathered = self.gather::<T>(scope).await;
        if raw {
            // Filtered as the fleet file says all the same: a server's endpoint
            // never offers what the gateway hides.
            let members = self.members();
            let kept: Vec<(usize, &T)> = gathered
                .iter()
                .filter_map(|(i, list)| Some((*i, list, members.get(*i)?.as_ref()?)))
                .flat_map(|(i, list, member)| {
                    list.iter()
                        .filter(|item| keep(&member.exposure, item))
                        .map(move |item| (i, item))
                })
                .collect();
            let names = names::Names::as_given(kept.iter().map(|(i, item)| (*i, item.name())));
            let items = kept.into_iter().map(|(_, item)| item.clone()).collect();
            return Arc::new((items, names));
        }
        let members = self.members();
        // A server that left since its list was gathered is not shown.
        let from: Vec<(usize, Arc<Vec<T>>, Exposure)> = gathered
            .into_iter()
            .filter_map(|(i, list)| {
                let exposure = members.get(i).and_then(Option::as_ref)?.exposure.clone();
                Some((i, list, exposure))
            })
            .collect();
        let kept = T::kept(&self.desk.board().catalogs)
            .filter(|c| c.built_from(&from))
            .map(|c| c.built.clone());
        if let Some(built) = kept {
            return built;
        }
        let kept: Vec<(usize, &T, &Exposure)> = from
            .iter()
            .flat_map(|(i, list, e)| list.iter().map(move |item| (*i, item, e)))
            .filter(|(_, item, e)| keep(e, item))
            .collect();
        let names = names::Names::assign(
            kept.iter()
                .map(|(i, item, e)| (*i, e.prefix.as_str(), item.name())),
        );
        let items = kept
            .iter()
            .zip(names.exposed())
            .map(|((_, item, _), exposed)| item.renamed(exposed.clone()))
            .collect();
        let built = Arc::new((items, names));
        let catalog = Catalog {
            from,
            built: built.clone(),
        };
        self.desk.built(T::built(catalog)).await;
        built
    }

    /// The route of tool `name` in the catalog as last built, if that catalog is
    /// still what [`Gateway::tools`] would give `scope`, with no await: every
    /// server of the scope runs the generation whose list it was built from, that
    /// list is fresh, and its exposure the same. `None` otherwise: the caller
    /// takes the long way, which builds the catalog again.
    pub(in crate::gateway) fn route_now(&self, scope: &Scope, name: &str) -> Option<names::Entry> {
        let members = self.members();
        let board = self.desk.board();
        let lists = &board.lists;
        let catalog = board.catalogs.tools.as_ref()?;
        let mut from = catalog.from.iter();
        let seen = |i: usize| scope.as_ref().is_none_or(|s| s.contains(&i));
        for (index, member) in members.iter().enumerate() {
            let Some(member) = member.as_ref().filter(|_| seen(index)) else {
                continue;
            };
            let (built_index, list, exposure) = from.next()?;
            let known = &lists.get(index)?.tools;
            let live = member.handle.serving_generation();
            let current = *built_index == index
                && *exposure == member.exposure
                && known.fresh
                && live.is_some()
                && known.generation == live
                && Arc::ptr_eq(&known.items, list);
            if !current {
                return None;
            }
        }
        if from.next().is_some() {
            return None;
        }
        catalog.built.1.route(name).cloned()
    }

    /// Tool `name` as the catalog last built shows it, on the terms of
    /// [`Gateway::route_now`] (a catalog that is still current, with no await);
    /// `None` otherwise.
    pub(in crate::gateway) fn tool_now(&self, scope: &Scope, name: &str) -> Option<rmcp::model::Tool> {
        self.route_now(scope, name)?;
        let board = self.desk.board();
        let (tools, _) = &*board.catalogs.tools.as_ref()?.built;
        tools
            .iter()
            .find(|listed| listed.tool.name == name)
            .map(|listed| listed.tool.clone())
    }

    /// `tool` (as the gateway's `tools/list` gives it) as its server wrote it,
    /// under its exposed name, from the catalog as last built, with no await:
    /// `None` when that catalog has no such tool, or one that differs from it.
    pub(in crate::gateway) fn tool_as_written(
        &self,
        tool: &rmcp::model::Tool,
    ) -> Option<Arc<rmcp::model::JsonObject>> {
        let board = self.desk.board();
        let catalog = board.catalogs.tools.as_ref()?;
        let listed = catalog.built.0.iter().find(|t| t.tool.name == tool.name)?;
        (listed.tool == *tool).then(|| listed.raw.clone())
    }

    /// Server `index`'s name and running generation, with no await (a use of the
    /// server for its idle timer); `None` when it is not running.
    pub(in crate::gateway) fn reach_now(
        &self,
        index: usize,
    ) -> Option<(String, crate::lifecycle::authority::Reach)> {
        let shown = self.shown.borrow();
        let member = shown.members.get(index)?.as_ref()?;
        let reach = member.handle.reach()?;
        Some((member.handle.name().to_owned(), reach))
    }

    /// The server that lists resource `uri`, or whose template's fixed start it
    /// begins with.
    pub(in crate::gateway) async fn resource_owner(&self, scope: &Scope, uri: &str) -> Option<usize> {
        for (index, resources) in self.gather::<Resource>(scope).await {
            if resources.iter().any(|r| r.uri == uri) {
                return Some(index);
            }
        }
        for (index, templates) in self.gather::<ResourceTemplate>(scope).await {
            let fits = templates.iter().any(|t| {
                let fixed = t.uri_template.split('{').next().unwrap_or_default();
                !fixed.is_empty() && uri.starts_with(fixed)
            });
            if fits {
                return Some(index);
            }
        }
        None
    }

    /// The server in `scope` whose resource template is `template` exactly (a
    /// completion's `ref/resource` names the template, not a resource); else
    /// the owner of a resource or template that `template` falls under.
    pub(in crate::gateway) async fn template_owner(&self, scope: &Scope, template: &str) -> Option<usize> {
        for (index, templates) in self.gather::<ResourceTemplate>(scope).await {
            if templates.iter().any(|t| t.uri_template == template) {
                return Some(index);
            }
        }
        self.resource_owner(scope, template).await
    }

    /// What the running servers in `scope` declare beyond their lists. A server
    /// that is not running declares nothing until it runs.
    pub(in crate::gateway) fn offered(&self, scope: &Scope) -> Offered {
        let members = self.members();
        let seen = |i: &usize| scope.as_ref().is_none_or(|s| s.contains(i));
        let mut offered = Offered::default();
        for member in (0..members.len()).filter(seen).filter_map(|i| members[i].as_ref()) {
            let Some(reach) = member.handle.reach() else {
                continue;
            };
            let Some(info) = reach.session.peer().peer_info() else {
                continue;
            };
            offered.completions |= info.capabilities.completions.is_some();
            offered.logging |= info.capabilities.logging.is_some();
            offered.subscribe |= info
                .capabilities
                .resources
                .as_ref()
                .is_some_and(|r| r.subscribe == Some(true));
            offered.tasks |= info.capabilities.supports_tasks();
        }
        offered
    }
}
