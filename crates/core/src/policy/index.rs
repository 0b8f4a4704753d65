//! Which policies can select a request, found without looking at each: a policy
//! whose targets name agents (or clients, tools, tags) exactly is filed under those
//! names, one whose tools share a literal prefix (`mcp__github__*`) under the prefix,
//! and only the rest is checked for every request. The candidates are then checked in
//! full (`Policy::selects`), so the index only saves work, never decides.

use std::collections::HashMap;

use super::glob::Glob;
use super::{Policy, RequestContext};

/// Policy positions (in set order) by the names that can select them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Index {
    by_agent: HashMap<String, Vec<u32>>,
    by_client: HashMap<String, Vec<u32>>,
    by_tool: HashMap<String, Vec<u32>>,
    by_tag: HashMap<String, Vec<u32>>,
    by_tool_prefix: HashMap<String, Vec<u32>>,
    /// The distinct prefix lengths of `by_tool_prefix`, shortest first.
    prefix_lens: Vec<usize>,
    /// Policies no name selects: checked for every request.
    rest: Vec<u32>,
    /// How many policies there are.
    len: usize,
}

/// The names of a list when none has a wildcard.
fn exact(list: &Option<Vec<Glob>>) -> Option<Vec<&str>> {
    let list = list.as_ref()?;
    list.iter()
        .map(|g| (!g.as_str().contains('*')).then_some(g.as_str()))
        .collect()
}

/// The literal prefixes of a list of patterns, when each has one.
fn prefixes(list: &Option<Vec<Glob>>) -> Option<Vec<&str>> {
    let list = list.as_ref()?;
    list.iter()
        .map(|g| {
            let prefix = g.as_str().split('*').next().unwrap_or("");
            (!prefix.is_empty()).then_some(prefix)
        })
        .collect()
}

impl Index {
    pub(crate) fn build(policies: &[Policy]) -> Index {
        let mut index = Index {
            len: policies.len(),
            ..Index::default()
        };
        for (i, policy) in policies.iter().enumerate() {
            let i = i as u32;
            let t = policy.targets();
            let file = |map: &mut HashMap<String, Vec<u32>>, names: Vec<&str>| {
                for name in names {
                    let slot = map.entry(name.to_owned()).or_default();
                    if slot.last() != Some(&i) {
                        slot.push(i);
                    }
                }
            };
            if let Some(names) = exact(&t.agents) {
                file(&mut index.by_agent, names);
            } else if let Some(names) = exact(&t.clients) {
                file(&mut index.by_client, names);
            } else if let Some(names) = exact(&t.tools) {
                file(&mut index.by_tool, names);
            } else if let Some(names) = exact(&t.tags) {
                file(&mut index.by_tag, names);
            } else if let Some(names) = prefixes(&t.tools) {
                for name in &names {
                    if !index.prefix_lens.contains(&name.len()) {
                        index.prefix_lens.push(name.len());
                    }
                }
                file(&mut index.by_tool_prefix, names);
            } else {
                index.rest.push(i);
            }
        }
        index.prefix_lens.sort_unstable();
        index
    }

    /// The positions of the policies that may select `ctx`, ascending, each once: marked
    /// in a bit set (one bit per policy, reused by the thread), then read in order, so
    /// there is nothing to sort or deduplicate.
    pub(crate) fn candidates(&self, ctx: &RequestContext<'_>, out: &mut Vec<u32>) {
        thread_local! {
            static MARKS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        MARKS.with(|marks| {
            let mut marks = marks.borrow_mut();
            let words = self.len.div_ceil(64);
            marks.clear();
            marks.resize(words, 0);
            self.mark(ctx, &mut marks);
            out.clear();
            for (w, &word) in marks.iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    let bit = word.trailing_zeros();
                    out.push(w as u32 * 64 + bit);
                    word &= word - 1;
                }
            }
        });
    }

    fn mark(&self, ctx: &RequestContext<'_>, marks: &mut [u64]) {
        let mut set = |positions: &[u32]| {
            for &i in positions {
                if let Some(word) = marks.get_mut(i as usize / 64) {
                    *word |= 1 << (i % 64);
                }
            }
        };
        set(&self.rest);
        let mut add = |map: &HashMap<String, Vec<u32>>, name: &str| {
            if let Some(found) = map.get(name) {
                set(found);
            }
        };
        add(&self.by_agent, ctx.agent);
        add(&self.by_client, ctx.client);
        for tag in ctx.tags {
            add(&self.by_tag, tag);
        }
        if let Some(tool) = ctx.tool {
            add(&self.by_tool, tool);
            for &len in &self.prefix_lens {
                match tool.get(..len) {
                    Some(prefix) => add(&self.by_tool_prefix, prefix),
                    None if len > tool.len() => break,
                    None => {}
                }
            }
        }
    }
}
