//! The Rust modules of the Python bindings (`python/src`, the `floe-python` crate)
//! import each other without cycles (issue 44).
//!
//! The bindings are a separate crate that this package cannot link against, so this
//! test reads their sources (`python/src/**/*.rs`) as text: each file is split into
//! tokens with `proc_macro2` (comments, doc comments and string literals are not
//! paths, so intra-doc links and messages do not count) and every path naming a
//! module of the crate is collected, in `use` items, code, types, and macro calls
//! alike:
//!
//! - `crate::a::…` (and `$crate::a::…`), `super::…`, `self::…`, with `use` groups
//!   (`use crate::{a, b::{self, X}}`) followed into each of their paths;
//! - a path starting at a child module of the current one (`errors::register(m)` in
//!   `lib.rs`).
//!
//! A path is an edge from the file it is written in to the file of the longest module
//! prefix of the path: `crate::errors::to_py` is an edge to `errors.rs`, a name
//! defined in the crate root (`crate::block_on`) an edge to `lib.rs`. `mod x;`
//! declarations are not edges (the root declares every module); `super::` inside an
//! inline `mod tests { … }` is the file's own module, so no edge. The graph has no
//! strongly connected component of more than one file: the test fails printing each
//! one, with the paths that make its edges.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// A module path inside the crate, `[]` for the root (`lib.rs`).
type ModPath = Vec<String>;

/// Module → module it names → the paths (as written, made absolute) naming it.
type Graph = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn display(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// The `.rs` files under `dir`, each with its module path (`lib.rs` → `[]`,
/// `a.rs` and `a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`).
fn module_files(dir: &Path) -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<ModPath, PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                let mut sub = prefix.to_vec();
                sub.push(name);
                walk(&path, &sub, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let mut module = prefix.to_vec();
                if !(stem == "mod" || (prefix.is_empty() && (stem == "lib" || stem == "main"))) {
                    module.push(stem.to_string());
                }
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, &[], &mut out);
    out
}

fn is_punct(tree: Option<&TokenTree>, c: char) -> bool {
    matches!(tree, Some(TokenTree::Punct(p)) if p.as_char() == c)
}

/// Whether `tokens[at..]` starts with `::`.
fn is_path_sep(tokens: &[TokenTree], at: usize) -> bool {
    is_punct(tokens.get(at), ':') && is_punct(tokens.get(at + 1), ':')
}

fn ident(tree: Option<&TokenTree>) -> Option<String> {
    match tree {
        Some(TokenTree::Ident(i)) => Some(i.to_string()),
        _ => None,
    }
}

/// Reads the rest of a path from `tokens[at..]` (just after a segment already in
/// `path`): `::segment` repeated, `::{…}` groups (each element a path of its own) and
/// `::*`. Pushes every complete path onto `out`; returns where the path ends.
fn read_path(
    tokens: &[TokenTree],
    mut at: usize,
    mut path: ModPath,
    out: &mut Vec<ModPath>,
) -> usize {
    while is_path_sep(tokens, at) {
        match tokens.get(at + 2) {
            Some(TokenTree::Ident(segment)) => {
                match segment.to_string().as_str() {
                    "super" => {
                        path.pop();
                    }
                    "self" => {}
                    s => path.push(s.to_string()),
                }
                at += 3;
            }
            Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
                let inner: Vec<TokenTree> = group.stream().into_iter().collect();
                for element in inner.split(|t| is_punct(Some(t), ',')) {
                    match ident(element.first()).as_deref() {
                        Some("self") => {
                            read_path(element, 1, path.clone(), out);
                        }
                        Some("super") => {
                            let mut sub = path.clone();
                            sub.pop();
                            read_path(element, 1, sub, out);
                        }
                        Some(first) => {
                            let mut sub = path.clone();
                            sub.push(first.to_string());
                            read_path(element, 1, sub, out);
                        }
                        None if is_punct(element.first(), '*') => out.push(path.clone()),
                        None => {}
                    }
                }
                return at + 3;
            }
            // `::*`, or a turbofish `::<T>`: the path so far.
            _ => {
                at += 2;
                break;
            }
        }
    }
    out.push(path);
    at
}

/// Every path naming a module of the crate in `tokens`, written in module `scope`
/// (the file's module, or an inline module in it), made absolute.
fn collect_paths(
    tokens: TokenStream,
    scope: &[String],
    modules: &BTreeSet<ModPath>,
    out: &mut Vec<ModPath>,
) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut at = 0;
    while at < tokens.len() {
        // An inline module: its body is written in a scope of its own.
        if ident(tokens.get(at)).as_deref() == Some("mod") {
            if let (Some(name), Some(TokenTree::Group(body))) =
                (ident(tokens.get(at + 1)), tokens.get(at + 2))
            {
                if body.delimiter() == Delimiter::Brace {
                    let mut inner = scope.to_vec();
                    inner.push(name);
                    collect_paths(body.stream(), &inner, modules, out);
                    at += 3;
                    continue;
                }
            }
        }
        match &tokens[at] {
            TokenTree::Group(group) => {
                collect_paths(group.stream(), scope, modules, out);
                at += 1;
            }
            TokenTree::Ident(first)
                if is_path_sep(&tokens, at + 1) && !(at >= 2 && is_path_sep(&tokens, at - 2)) =>
            {
                let base = match first.to_string().as_str() {
                    "crate" => Some(Vec::new()),
                    "super" => scope.split_last().map(|(_, parent)| parent.to_vec()),
                    "self" => Some(scope.to_vec()),
                    // A child module of the current one, named without a prefix.
                    name => {
                        let mut child = scope.to_vec();
                        child.push(name.to_string());
                        modules.contains(&child).then_some(child)
                    }
                };
                at = match base {
                    Some(base) => read_path(&tokens, at + 1, base, out),
                    None => at + 1,
                };
            }
            _ => at += 1,
        }
    }
}

/// The modules of the crate `source` (in module `module`) names, each with the paths
/// naming it; `modules` are the crate's modules that have a file.
fn dependencies(
    source: &str,
    module: &[String],
    modules: &BTreeSet<ModPath>,
) -> BTreeMap<String, BTreeSet<String>> {
    let tokens: TokenStream = source
        .parse()
        .unwrap_or_else(|e| panic!("module {} does not tokenize: {e:?}", display(module)));
    let mut paths = Vec::new();
    collect_paths(tokens, module, modules, &mut paths);
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in paths {
        // The file defining what the path names: its longest module prefix.
        let target = (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| modules.contains(prefix))
            .unwrap_or_default();
        if target != module {
            let written = std::iter::once("crate")
                .chain(path.iter().map(String::as_str))
                .collect::<Vec<_>>();
            out.entry(display(&target))
                .or_default()
                .insert(written.join("::"));
        }
    }
    out
}

/// The module graph of the crate whose sources are in `dir`.
fn module_graph(dir: &Path) -> Graph {
    let files = module_files(dir);
    let modules: BTreeSet<ModPath> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(module, path)| {
            let source = std::fs::read_to_string(path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            (display(module), dependencies(&source, module, &modules))
        })
        .collect()
}

/// The strongly connected components of `graph` that are cycles (more than one node,
/// or a node with an edge to itself), each sorted, in sorted order (Tarjan).
fn cycles<V>(graph: &BTreeMap<String, BTreeMap<String, V>>) -> Vec<Vec<String>> {
    struct Tarjan<'g, V> {
        graph: &'g BTreeMap<String, BTreeMap<String, V>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g, V> Tarjan<'g, V> {
        fn visit(&mut self, node: &'g str) {
            let n = self.index.len();
            self.index.insert(node, n);
            self.low.insert(node, n);
            self.stack.push(node);
            self.on_stack.insert(node);
            let graph = self.graph;
            for succ in graph.get(node).into_iter().flat_map(|edges| edges.keys()) {
                let succ = succ.as_str();
                if !self.index.contains_key(succ) {
                    self.visit(succ);
                    let low = self.low[node].min(self.low[succ]);
                    self.low.insert(node, low);
                } else if self.on_stack.contains(succ) {
                    let low = self.low[node].min(self.index[succ]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                loop {
                    let member = self.stack.pop().unwrap();
                    self.on_stack.remove(member);
                    component.push(member.to_string());
                    if member == node {
                        break;
                    }
                }
                let self_loop = graph
                    .get(node)
                    .is_some_and(|edges| edges.contains_key(node));
                if component.len() > 1 || self_loop {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !tarjan.index.contains_key(node.as_str()) {
            tarjan.visit(node);
        }
    }
    tarjan.found.sort();
    tarjan.found
}

fn describe(graph: &Graph, component: &[String]) -> String {
    let mut text = component.join(" <-> ");
    for module in component {
        for (target, paths) in &graph[module] {
            if component.contains(target) {
                let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
                text.push_str(&format!("\n  {module} -> {target}: {}", paths.join(", ")));
            }
        }
    }
    text
}

fn bindings_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join("src")
}

#[test]
fn the_bindings_modules_import_each_other_without_cycles() {
    let graph = module_graph(&bindings_dir());
    // The reader sees the crate (an empty graph would pass by accident).
    assert!(
        graph.contains_key("crate") && graph.contains_key("session"),
        "{graph:#?}"
    );
    assert!(
        graph["session"].contains_key("errors"),
        "{:#?}",
        graph["session"]
    );
    assert!(
        graph["crate"].contains_key("errors"),
        "{:#?}",
        graph["crate"]
    );
    let found = cycles(&graph);
    let report: Vec<String> = found.iter().map(|c| describe(&graph, c)).collect();
    assert!(
        found.is_empty(),
        "import cycles between the modules of python/src:\n{}",
        report.join("\n")
    );
}

#[test]
fn the_cycle_finder_finds_the_cycles_of_a_made_up_graph() {
    fn graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, BTreeMap<String, ()>> {
        edges
            .iter()
            .map(|(from, to)| {
                (
                    from.to_string(),
                    to.iter().map(|t| (t.to_string(), ())).collect(),
                )
            })
            .collect()
    }
    let g = graph(&[
        ("a", &["b"]),
        ("b", &["c"]),
        ("c", &["a", "d"]), // a -> b -> c -> a
        ("d", &["e"]),
        ("e", &["d"]), // d <-> e, reached from the first cycle
        ("f", &["f"]), // a module naming itself
        ("g", &["a", "h"]),
        ("h", &[]),       // g and h are on no cycle
        ("i", &["gone"]), // an edge to a node without an entry
    ]);
    let expected: Vec<Vec<String>> = vec![
        vec!["a".into(), "b".into(), "c".into()],
        vec!["d".into(), "e".into()],
        vec!["f".into()],
    ];
    assert_eq!(cycles(&g), expected);
    assert!(cycles(&graph(&[("x", &["y"]), ("y", &[])])).is_empty());
}

#[test]
fn the_reader_finds_the_paths_of_made_up_sources() {
    let modules: BTreeSet<ModPath> = [
        vec![],
        vec!["x".to_string()],
        vec!["a".to_string()],
        vec!["b".to_string()],
        vec!["c".to_string()],
        vec!["d".to_string()],
        vec!["e".to_string()],
    ]
    .into_iter()
    .collect();
    let source = r#"
        //! Intra-doc links are no edges: [`crate::e::X`].
        use std::collections::BTreeMap;
        use crate::{a::{self as alias, Thing}, c::*};
        // crate::e::in_a_comment
        /// Documented with [`crate::e::Y`].
        pub(crate) fn f() -> Vec<super::b::B> {
            let message = "crate::e::in_a_string";
            format!("{}", $crate::d::g(floe::e::not_ours()));
            root_item();
            crate::helper()
        }
        #[cfg(test)]
        mod tests {
            use super::f; // this file's own module
            use super::super::e::E; // the root's child e
        }
    "#;
    let found = dependencies(source, &["x".to_string()], &modules);
    let got: BTreeMap<&str, Vec<&str>> = found
        .iter()
        .map(|(m, paths)| (m.as_str(), paths.iter().map(String::as_str).collect()))
        .collect();
    let expected: BTreeMap<&str, Vec<&str>> = [
        ("a", vec!["crate::a", "crate::a::Thing"]),
        ("b", vec!["crate::b::B"]),
        ("c", vec!["crate::c"]),
        ("crate", vec!["crate::helper"]),
        ("d", vec!["crate::d::g"]),
        ("e", vec!["crate::e::E"]),
    ]
    .into_iter()
    .collect();
    assert_eq!(got, expected);

    // In the root, a child module named without a prefix is an edge.
    let found = dependencies("mod a; fn init() { a::register(); b::c(); }", &[], &modules);
    assert_eq!(found.keys().collect::<Vec<_>>(), ["a", "b"]);
}
