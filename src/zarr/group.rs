//! Zarr groups (core spec, "Group metadata"): creation, opening, attributes and
//! children; [`open_node`], which opens a node as an array or a group.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::format::NodePath;
use crate::zarr::array::{Array, ArrayBuilder};
use crate::zarr::error::{ZarrError, ZarrResult};
use crate::zarr::metadata::{GroupMetadata, NodeMetadata};
use crate::zarr::node::{
    ensure_parent_groups, list_children, metadata_key, node_exists, node_prefix, normalize_path,
    read_node_metadata, ZarrFormat,
};
use crate::zarr::store::Store;

/// A Zarr group in a store.
#[derive(Clone, Debug)]
pub struct Group {
    store: Arc<dyn Store>,
    path: String,
    metadata: GroupMetadata,
    format: ZarrFormat,
}

impl Group {
    /// Creates a group at `path` with `attributes` (and any missing parent groups).
    ///
    /// # Errors
    /// [`ZarrError::NodeExists`] when a node already exists there;
    /// [`ZarrError::WrongNodeType`] when a parent is an array;
    /// [`ZarrError::ReadOnly`]; store errors.
    pub async fn create(
        store: Arc<dyn Store>,
        path: &str,
        attributes: Map<String, Value>,
    ) -> ZarrResult<Group> {
        let path = normalize_path(path)?;
        if !store.is_writable() {
            return Err(ZarrError::ReadOnly { path });
        }
        if node_exists(store.as_ref(), &path).await? {
            return Err(ZarrError::NodeExists { path });
        }
        ensure_parent_groups(store.as_ref(), &path).await?;
        let metadata = GroupMetadata::new(attributes);
        store
            .set(&metadata_key(&path), Bytes::from(metadata.to_bytes()))
            .await?;
        Ok(Group {
            store,
            path,
            metadata,
            format: ZarrFormat::V3,
        })
    }

    /// Opens the group at `path` (v3 `zarr.json` or v2 `.zgroup`).
    ///
    /// # Errors
    /// [`ZarrError::NodeNotFound`]; [`ZarrError::WrongNodeType`] for an array;
    /// metadata and store errors.
    pub async fn open(store: Arc<dyn Store>, path: &str) -> ZarrResult<Group> {
        let path = normalize_path(path)?;
        match read_node_metadata(store.as_ref(), &path).await? {
            (NodeMetadata::Group(m), format) => Group::from_metadata(store, &path, m, format),
            (NodeMetadata::Array(_), _) => Err(ZarrError::WrongNodeType {
                path,
                expected: "group",
                found: "array",
            }),
        }
    }

    /// A group handle from already-read metadata (nothing is read or written).
    ///
    /// # Errors
    /// [`ZarrError::InvalidPath`] for a path [`normalize_path`] refuses.
    pub fn from_metadata(
        store: Arc<dyn Store>,
        path: &str,
        metadata: GroupMetadata,
        format: ZarrFormat,
    ) -> ZarrResult<Group> {
        Ok(Group {
            store,
            path: normalize_path(path)?,
            metadata,
            format,
        })
    }

    /// The node path in store form (`a/b`, `""` for the root).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The node path as sessions, diffs and conflicts name it (`/a/b`, `/` for the
    /// root).
    pub fn node_path(&self) -> NodePath {
        // `path` was normalised when the group was opened or created.
        NodePath::new(&self.path).unwrap_or_else(|_| NodePath::root())
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The metadata.
    pub fn metadata(&self) -> &GroupMetadata {
        &self.metadata
    }

    /// The user attributes.
    pub fn attributes(&self) -> &Map<String, Value> {
        &self.metadata.attributes
    }

    /// Whether the group was read from Zarr v2 metadata.
    pub fn zarr_format(&self) -> ZarrFormat {
        self.format
    }

    fn child_path(&self, name: &str) -> ZarrResult<String> {
        let name = normalize_path(name)?;
        Ok(format!("{}{}", node_prefix(&self.path), name))
    }

    /// The direct children: `(path, metadata)` sorted by path.
    ///
    /// # Errors
    /// Store and metadata errors.
    pub async fn children(&self) -> ZarrResult<Vec<(String, NodeMetadata)>> {
        list_children(self.store.as_ref(), &self.path).await
    }

    /// Creates a child group `name`.
    ///
    /// # Errors
    /// As [`Group::create`].
    pub async fn create_group(
        &self,
        name: &str,
        attributes: Map<String, Value>,
    ) -> ZarrResult<Group> {
        Group::create(Arc::clone(&self.store), &self.child_path(name)?, attributes).await
    }

    /// Creates a child array `name` from a builder.
    ///
    /// # Errors
    /// As [`ArrayBuilder::create`].
    pub async fn create_array(&self, name: &str, builder: ArrayBuilder) -> ZarrResult<Array> {
        builder
            .create(Arc::clone(&self.store), &self.child_path(name)?)
            .await
    }

    /// Opens the child array `name`.
    ///
    /// # Errors
    /// As [`Array::open`].
    pub async fn open_array(&self, name: &str) -> ZarrResult<Array> {
        Array::open(Arc::clone(&self.store), &self.child_path(name)?).await
    }

    /// Opens the child group `name`.
    ///
    /// # Errors
    /// As [`Group::open`].
    pub async fn open_group(&self, name: &str) -> ZarrResult<Group> {
        Group::open(Arc::clone(&self.store), &self.child_path(name)?).await
    }

    /// Replaces the user attributes and writes the metadata.
    ///
    /// # Errors
    /// [`ZarrError::ReadOnly`]; [`ZarrError::InvalidMetadata`] for Zarr v2 groups;
    /// store errors.
    pub async fn set_attributes(&mut self, attributes: Map<String, Value>) -> ZarrResult<()> {
        if self.format == ZarrFormat::V2 {
            return Err(ZarrError::InvalidMetadata {
                path: self.path.clone(),
                reason: "metadata of Zarr v2 groups cannot be modified".into(),
            });
        }
        if !self.store.is_writable() {
            return Err(ZarrError::ReadOnly {
                path: self.path.clone(),
            });
        }
        let mut metadata = self.metadata.clone();
        metadata.attributes = attributes;
        self.store
            .set(&metadata_key(&self.path), Bytes::from(metadata.to_bytes()))
            .await?;
        self.metadata = metadata;
        Ok(())
    }

    /// Merges `attributes` into the user attributes (`null` values remove keys).
    ///
    /// # Errors
    /// As [`Group::set_attributes`].
    pub async fn update_attributes(&mut self, attributes: Map<String, Value>) -> ZarrResult<()> {
        let merged = crate::zarr::node::merge_attributes(&self.metadata.attributes, attributes);
        self.set_attributes(merged).await
    }
}

/// An opened array or group.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Node {
    /// An array.
    Array(Array),
    /// A group.
    Group(Group),
}

impl Node {
    /// The node's path.
    pub fn path(&self) -> &str {
        match self {
            Node::Array(a) => a.path(),
            Node::Group(g) => g.path(),
        }
    }
}

/// Opens the node at `path` as an [`Array`] or a [`Group`].
///
/// # Errors
/// As [`read_node_metadata`].
pub async fn open_node(store: Arc<dyn Store>, path: &str) -> ZarrResult<Node> {
    let path = normalize_path(path)?;
    let (meta, format) = read_node_metadata(store.as_ref(), &path).await?;
    Ok(match meta {
        NodeMetadata::Array(m) => Node::Array(Array::from_metadata(store, &path, m, format)?),
        NodeMetadata::Group(m) => Node::Group(Group::from_metadata(store, &path, m, format)?),
    })
}
