//! The crate's import graph has no cycles (issue 28, section 2).
//!
//! Scans `src/**/*.rs` (the library crate, and the binary's `src/cli/`, which names
//! the library as `floe::…`, so only its own files' edges count; the Python
//! bindings in `python/` are a separate crate) with `syn`, collects every reference
//! to another module of the crate — `use` items (`crate::…`, `super::…`, `self::…`,
//! child modules), paths in code and types, and such paths inside macro calls — and
//! builds two graphs:
//!
//! - the file graph: an edge from a file to the file that defines what it names.
//!   Re-exports are followed to the defining file (naming `crate::Error` is an edge to
//!   `src/error/mod.rs`, not to `src/lib.rs`); a `mod x;` declaration is not an edge.
//!   A module and its submodules are one unit to the files outside it, so references
//!   between a file and the files of its enclosing modules (`storage/local.rs` naming
//!   `super::Storage` while `storage/mod.rs` builds a `local::LocalStorage`) are not
//!   edges: cycles are between files of which neither encloses the other.
//! - the module graph: the same edges between top-level modules (`zarr`, `session`, …).
//!
//! Test code (`#[cfg(test)]` items) and doc comments (intra-doc links) are not
//! dependencies and are skipped. The test fails listing every cycle (each strongly
//! connected component, with its edges and the path that makes each edge), except those
//! in [`ALLOWED_FILE_CYCLES`] / [`ALLOWED_MODULE_CYCLES`]; an allow-list entry that no
//! longer matches a cycle fails too, so that the list only ever shrinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// File cycles known and tolerated for now, each the exact set of files of one
/// strongly connected component. Empty this list as they are removed.
const ALLOWED_FILE_CYCLES: &[&[&str]] = &[];

/// Module (top-level) cycles known and tolerated for now. Empty as they are removed.
const ALLOWED_MODULE_CYCLES: &[&[&str]] = &[];

/// The top-level modules in layers, bottom first: a module imports only modules of
/// lower layers (`src/lib.rs`, which only declares and re-exports, is left out).
/// `zarr` knows nothing of sessions: the Zarr view of a session, `SessionStore`,
/// lives in `session/store.rs`.
const LAYERS: &[&[&str]] = &[
    // helpers of every layer: the compute pool, recycled buffers, zstd contexts
    &["compute", "buffer_pool", "zstd_context"],
    &["storage"],
    &["format"],
    // the public error types, wrapping storage and format errors
    &["error"],
    &["virtual_refs"],
    &["assets"],
    &["refs"],
    // expiry, garbage collection, upgrade, repair: on assets and refs; the
    // repository's maintenance methods call them
    &["lifecycle"],
    &["zarr"],
    &["session"],
    &["repository"],
    &["ops"],
    &["serve"],
    &["cli"],
];

/// A module of the crate: the file it is in, what it defines and what it imports.
#[derive(Default)]
struct Module {
    file: String,
    /// Names of the items defined in the module (types, functions, constants, macros...).
    items: BTreeSet<String>,
    /// Child modules (`mod x;` or inline).
    children: BTreeSet<String>,
    /// `use` imports: the name they bind → the path as written.
    imports: BTreeMap<String, Vec<String>>,
    /// Glob imports (`use x::*`), as written.
    globs: Vec<Vec<String>>,
}

/// A reference found in a file: the module it was written in and the path as written.
struct Reference {
    module: Vec<String>,
    path: Vec<String>,
}

/// The crate checked: this one, or the checkout `FLOE_MODULE_GRAPH_ROOT` names (to
/// try the checker on other sources).
fn crate_root() -> PathBuf {
    std::env::var_os("FLOE_MODULE_GRAPH_ROOT")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file of `src/`: `src/lib.rs` → `[]`, `src/a/mod.rs` and
/// `src/a.rs` → `[a]`, `src/a/b.rs` → `[a, b]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .skip(1) // "src"
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "test")
    })
}

/// Expands a use tree into (bound name or `*`, path as written).
fn expand_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            expand_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone()));
                }
            } else {
                let mut p = prefix.clone();
                p.push(name.clone());
                out.push((name, p));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut p = prefix.clone();
            let name = r.ident.to_string();
            if name != "self" {
                p.push(name);
            }
            out.push((r.rename.to_string(), p));
        }
        syn::UseTree::Glob(_) => out.push(("*".to_string(), prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                expand_use(t, prefix, out);
            }
        }
    }
}

/// Collects modules and references of one file.
struct Collector<'a> {
    file: String,
    module: Vec<String>,
    modules: &'a mut BTreeMap<Vec<String>, Module>,
    refs: &'a mut Vec<(String, Reference)>,
}

impl Collector<'_> {
    fn this(&mut self) -> &mut Module {
        let file = self.file.clone();
        self.modules
            .entry(self.module.clone())
            .or_insert_with(|| Module {
                file,
                ..Module::default()
            })
    }

    fn reference(&mut self, path: Vec<String>) {
        self.refs.push((
            self.file.clone(),
            Reference {
                module: self.module.clone(),
                path,
            },
        ));
    }

    /// `crate::a::b`, `super::x`, `self::x` (and `a::b` for a child `a`, decided
    /// later) inside a macro's tokens.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let toks: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < toks.len() {
            if let TokenTree::Group(g) = &toks[i] {
                self.scan_tokens(g.stream());
                i += 1;
                continue;
            }
            let start_ident = matches!(&toks[i], TokenTree::Ident(id) if id == "crate" || id == "super" || id == "self");
            let after_colons = i >= 2
                && matches!(&toks[i - 1], TokenTree::Punct(p) if p.as_char() == ':')
                && matches!(&toks[i - 2], TokenTree::Punct(p) if p.as_char() == ':');
            if start_ident && !after_colons {
                let mut path = Vec::new();
                let mut j = i;
                while let Some(TokenTree::Ident(id)) = toks.get(j) {
                    path.push(id.to_string());
                    let colons = matches!(toks.get(j + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                        && matches!(toks.get(j + 2), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                    if !colons {
                        break;
                    }
                    j += 3;
                }
                if path.len() > 1 {
                    self.reference(path);
                }
                i = j + 1;
            } else {
                i += 1;
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::ExternCrate(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::ForeignMod(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::TraitAlias(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Union(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => &[],
        };
        if is_cfg_test(attrs) {
            return;
        }
        let defined = match item {
            syn::Item::Const(i) => Some(i.ident.to_string()),
            syn::Item::Enum(i) => Some(i.ident.to_string()),
            syn::Item::Fn(i) => Some(i.sig.ident.to_string()),
            syn::Item::Macro(i) => i.ident.as_ref().map(|i| i.to_string()),
            syn::Item::Static(i) => Some(i.ident.to_string()),
            syn::Item::Struct(i) => Some(i.ident.to_string()),
            syn::Item::Trait(i) => Some(i.ident.to_string()),
            syn::Item::TraitAlias(i) => Some(i.ident.to_string()),
            syn::Item::Type(i) => Some(i.ident.to_string()),
            syn::Item::Union(i) => Some(i.ident.to_string()),
            _ => None,
        };
        if let Some(name) = defined {
            self.this().items.insert(name);
        }
        match item {
            syn::Item::Mod(m) => {
                let name = m.ident.to_string();
                self.this().children.insert(name.clone());
                if let Some((_, items)) = &m.content {
                    self.module.push(name);
                    self.this();
                    for i in items {
                        self.visit_item(i);
                    }
                    self.module.pop();
                }
            }
            syn::Item::Use(u) => {
                let mut out = Vec::new();
                expand_use(&u.tree, &mut Vec::new(), &mut out);
                for (name, path) in out {
                    if name == "*" {
                        self.this().globs.push(path.clone());
                    } else if name != "_" {
                        self.this().imports.insert(name, path.clone());
                    }
                    self.reference(path);
                }
            }
            _ => syn::visit::visit_item(self, item),
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !is_cfg_test(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            let segs = path.segments.iter().map(|s| s.ident.to_string()).collect();
            self.reference(segs);
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.scan_tokens(mac.tokens.clone());
    }
}

/// The crate's modules and references, parsed from `src/`.
struct Crate {
    modules: BTreeMap<Vec<String>, Module>,
    refs: Vec<(String, Reference)>,
}

impl Crate {
    fn load() -> Crate {
        let root = crate_root();
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        let mut modules = BTreeMap::new();
        let mut refs = Vec::new();
        for path in files {
            let rel = path.strip_prefix(&root).unwrap().to_path_buf();
            if rel == Path::new("src/main.rs") {
                continue; // the binary crate: it names the library as `floe::`
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let ast = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{}: does not parse: {e}", rel.display()));
            let file = rel.to_string_lossy().replace('\\', "/");
            let mut c = Collector {
                file,
                module: module_of(&rel),
                modules: &mut modules,
                refs: &mut refs,
            };
            c.this();
            for item in &ast.items {
                c.visit_item(item);
            }
        }
        Crate { modules, refs }
    }

    /// The path as written in `module`, made absolute (`None`: not in this crate).
    fn absolute(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        let mut base: Vec<String> = module.to_vec();
        let mut rest = path;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &path[1..];
            }
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            name => {
                let m = self.modules.get(module)?;
                if m.children.contains(name) {
                    // a child module: relative
                } else if let Some(imported) = m.imports.get(name) {
                    // `use crate::format;` then `format::X`
                    if imported.as_slice() == path {
                        return None; // the import itself, of an external crate
                    }
                    let mut p = self.absolute(module, imported)?;
                    p.extend_from_slice(&path[1..]);
                    return Some(p);
                } else {
                    return None;
                }
            }
        }
        base.extend_from_slice(rest);
        Some(base)
    }

    /// The file defining what an absolute path names, following imports and
    /// re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Option<String> {
        if depth > 16 {
            return None;
        }
        let mut module: Vec<String> = Vec::new();
        let mut i = 0;
        while i < path.len() {
            let mut next = module.clone();
            next.push(path[i].clone());
            if self.modules.contains_key(&next) {
                module = next;
                i += 1;
            } else {
                break;
            }
        }
        let m = self.modules.get(&module)?;
        let Some(name) = path.get(i) else {
            return Some(m.file.clone());
        };
        if m.items.contains(name) {
            return Some(m.file.clone());
        }
        if let Some(imported) = m.imports.get(name) {
            let mut p = self.absolute(&module, imported)?;
            p.extend_from_slice(&path[i + 1..]);
            return self.resolve(&p, depth + 1);
        }
        for glob in &m.globs {
            if let Some(g) = self.absolute(&module, glob) {
                if let Some(gm) = self.modules.get(&g) {
                    if gm.items.contains(name)
                        || gm.imports.contains_key(name)
                        || gm.children.contains(name)
                    {
                        let mut p = g.clone();
                        p.extend_from_slice(&path[i..]);
                        return self.resolve(&p, depth + 1);
                    }
                }
            }
        }
        Some(m.file.clone())
    }

    /// File edges: (from, to) → the first path written that makes the edge.
    fn file_edges(&self) -> BTreeMap<(String, String), String> {
        let mut edges = BTreeMap::new();
        for (file, r) in &self.refs {
            let Some(abs) = self.absolute(&r.module, &r.path) else {
                continue;
            };
            let Some(to) = self.resolve(&abs, 0) else {
                continue;
            };
            let (a, b) = (module_of(Path::new(file)), module_of(Path::new(&to)));
            if !a.starts_with(&b) && !b.starts_with(&a) {
                edges
                    .entry((file.clone(), to))
                    .or_insert_with(|| r.path.join("::"));
            }
        }
        edges
    }
}

/// The top-level module of a file: `src/zarr/store/mod.rs` → `zarr`, `src/assets.rs` →
/// `assets`; `src/lib.rs` → `crate`.
fn top_module(file: &str) -> String {
    let rel = file.trim_start_matches("src/");
    let first = rel.split('/').next().unwrap_or(rel);
    match first.trim_end_matches(".rs") {
        "lib" => "crate".to_string(),
        m => m.to_string(),
    }
}

/// The edges between sibling modules at every depth: for a file edge `a → b`, the
/// children of their deepest common module that hold `a` and `b`
/// (`src/format/snapshot.rs → src/format/repo_info/encode.rs` is
/// `format::snapshot → format::repo_info`). A file and the files of the modules
/// enclosing it make no pair, as in the file graph. So a cycle between two modules
/// of one parent shows even when no two of their files name each other.
fn sibling_edges(files: &BTreeMap<(String, String), String>) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for ((a, b), via) in files {
        let (ma, mb) = (module_of(Path::new(a)), module_of(Path::new(b)));
        let common = ma.iter().zip(&mb).take_while(|(x, y)| x == y).count();
        if common == ma.len() || common == mb.len() {
            continue; // one encloses the other
        }
        let unit = |m: &[String]| m[..=common].join("::");
        out.entry((unit(&ma), unit(&mb)))
            .or_insert_with(|| format!("{via}` in `{a}"));
    }
    out
}

/// Strongly connected components with more than one node (Tarjan).
fn cycles(nodes: &BTreeSet<String>, edges: &BTreeSet<(String, String)>) -> Vec<BTreeSet<String>> {
    let mut adj: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges {
        adj.entry(a).or_default().push(b);
    }
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn strong<'a>(v: &'a str, adj: &BTreeMap<&'a str, Vec<&'a str>>, s: &mut State<'a>) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        for &w in adj.get(v).map(Vec::as_slice).unwrap_or(&[]) {
            if !s.index.contains_key(w) {
                strong(w, adj, s);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in nodes {
        if !s.index.contains_key(v.as_str()) {
            strong(v, &adj, &mut s);
        }
    }
    s.out.sort();
    s.out
}

/// Checks the cycles of a graph against an allow-list; returns the problems found.
fn check(
    what: &str,
    edges: &BTreeMap<(String, String), String>,
    allowed: &[&[&str]],
) -> Vec<String> {
    let nodes: BTreeSet<String> = edges
        .keys()
        .flat_map(|(a, b)| [a.clone(), b.clone()])
        .collect();
    let plain: BTreeSet<(String, String)> = edges.keys().cloned().collect();
    let found = cycles(&nodes, &plain);
    let allowed: Vec<BTreeSet<String>> = allowed
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    let mut problems = Vec::new();
    for comp in &found {
        if allowed.contains(comp) {
            continue;
        }
        let mut msg = format!(
            "{what} cycle: {}\n",
            comp.iter().cloned().collect::<Vec<_>>().join(" ↔ ")
        );
        for ((a, b), via) in edges {
            if comp.contains(a) && comp.contains(b) {
                msg.push_str(&format!("    {a} → {b}  (via `{via}`)\n"));
            }
        }
        problems.push(msg);
    }
    for entry in &allowed {
        if !found.contains(entry) {
            problems.push(format!(
                "the allow-list entry {entry:?} ({what} graph) is no longer a cycle as listed: \
                 remove or update it in tests/integration/module_graph.rs\n"
            ));
        }
    }
    problems
}

#[test]
fn no_import_cycles_between_files_or_modules() {
    let krate = Crate::load();
    let files = krate.file_edges();
    let mut modules = BTreeMap::new();
    for ((a, b), via) in &files {
        let (ma, mb) = (top_module(a), top_module(b));
        if ma != mb {
            modules
                .entry((ma, mb))
                .or_insert_with(|| format!("{via}` in `{a}"));
        }
    }
    let mut problems = check("file", &files, ALLOWED_FILE_CYCLES);
    problems.extend(check("module", &modules, ALLOWED_MODULE_CYCLES));
    problems.extend(check("sibling module", &sibling_edges(&files), &[]));
    if std::env::var_os("FLOE_PRINT_MODULE_GRAPH").is_some() {
        for ((a, b), via) in &modules {
            println!("{a} → {b}  (via `{via}`)");
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles in src/ (issue 28: data flows one way):\n{}",
        problems.join("\n")
    );
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let krate = Crate::load();
    let layer = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for ((a, b), via) in &krate.file_edges() {
        let (ma, mb) = (top_module(a), top_module(b));
        if ma == mb || ma == "crate" {
            continue;
        }
        for m in [&ma, &mb] {
            if layer(m).is_none() && seen.insert(m.clone()) {
                problems.push(format!("module `{m}` is in no layer: add it to LAYERS"));
            }
        }
        if let (Some(la), Some(lb)) = (layer(&ma), layer(&mb)) {
            if la <= lb && seen.insert(format!("{ma}->{mb}")) {
                problems.push(format!(
                    "`{ma}` (layer {la}) imports `{mb}` (layer {lb}): `{via}` in `{a}`"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "imports against the layer order (tests/integration/module_graph.rs LAYERS):\n{}",
        problems.join("\n")
    );
}

/// The checker itself: a reference through a re-export lands on the defining file, a
/// `super::` reference on the parent, and a cycle of two files is reported.
#[test]
fn the_checker_sees_references_and_cycles() {
    let krate = Crate::load();
    let edges = krate.file_edges();
    // `use crate::error::Result` style imports through `src/lib.rs`'s re-exports land
    // on the defining file, never on `src/lib.rs`.
    assert!(edges.keys().all(|(_, to)| to != "src/lib.rs"));
    assert!(edges.contains_key(&(
        "src/session/commit/flush.rs".to_string(),
        "src/session/change_set/mod.rs".to_string()
    )));
    let mut fake = BTreeMap::new();
    fake.insert(("a".to_string(), "b".to_string()), "x".to_string());
    fake.insert(("b".to_string(), "a".to_string()), "y".to_string());
    fake.insert(("b".to_string(), "c".to_string()), "z".to_string());
    let problems = check("file", &fake, &[]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("a ↔ b") && problems[0].contains("a → b  (via `x`)"));
    assert!(check("file", &fake, &[&["a", "b"]]).is_empty());
    assert_eq!(check("file", &fake, &[&["a", "b"], &["b", "c"]]).len(), 1);
    // Sibling modules: two files of `x` and `y` naming files of each other's module
    // (not each other) are a cycle of `m::x` and `m::y`; a parent naming its child is
    // no edge.
    let mut files = BTreeMap::new();
    for (a, b) in [
        ("src/m/x.rs", "src/m/y/inner.rs"),
        ("src/m/y/mod.rs", "src/m/x.rs"),
        ("src/m/mod.rs", "src/m/x.rs"),
    ] {
        files.insert((a.to_string(), b.to_string()), "p".to_string());
    }
    let siblings = sibling_edges(&files);
    assert_eq!(
        siblings.keys().cloned().collect::<Vec<_>>(),
        [
            ("m::x".to_string(), "m::y".to_string()),
            ("m::y".to_string(), "m::x".to_string())
        ]
    );
    assert!(check("file", &files, &[]).is_empty());
    assert_eq!(check("sibling module", &siblings, &[]).len(), 1);
}

/// `unsafe` only where declared (issue 44): the library denies `unsafe_code` at its
/// root, and only the modules listed here allow it back (on their `mod` line), each
/// `unsafe` block with a `// SAFETY:` comment (clippy's `undocumented_unsafe_blocks`,
/// warned at the root and denied in CI).
#[test]
fn unsafe_code_only_in_declared_modules() {
    const DECLARED: &[&str] = &[
        "src/format/mod.rs: mod fb;",
        "src/format/mod.rs: pub mod snapshot;",
        "src/lib.rs: mod zstd_context;",
        "src/serve/mod.rs: mod file_body;",
        "src/zarr/codec/mod.rs: pub mod blosc;",
    ];
    let root = crate_root();
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("#![deny(unsafe_code)]"),
        "src/lib.rs must deny unsafe_code"
    );
    assert!(lib.contains("#![warn(clippy::undocumented_unsafe_blocks)]"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() == "#[allow(unsafe_code)]" {
                let next = lines.get(i + 1).map_or("", |l| l.trim());
                found.push(format!("{rel}: {next}"));
            }
        }
    }
    found.sort();
    assert_eq!(found, DECLARED, "modules allowing unsafe code");
}
