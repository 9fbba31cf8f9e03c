//! Read-only data merging (LLVM's ConstantMerge, GCC's `-fipa-icf-variables`):
//! identical read-only data objects defined through the wrapper are folded into
//! one; the others become aliases of it (their symbols name its bytes).
//!
//! Nothing in `cranelift_module` says whether a data object's address is
//! significant, so folding is off unless the backend asks
//! ([`DataMerging`]): for every local read-only object, or for the objects it
//! lists (rustc knows its `unnamed_addr` constants). Two objects fold when they
//! are both read-only, both thread-local or neither, and equal in bytes (or zero
//! size), alignment, custom section, `used` flag and relocations (offset, addend,
//! and the very same target symbol). The first defined of each class is kept.
//! Only an object file can alias a data symbol, so only
//! [`MergingModule::finish_object`](super::MergingModule::finish_object) folds.

use super::compiled::ExactTarget;
use cranelift_module::{DataDescription, DataId, Init, Linkage, ModuleDeclarations};
use std::collections::{HashMap, HashSet};

/// Which read-only data objects may be folded with an identical one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DataMerging {
    /// None (the default): every data object keeps its own bytes and address.
    #[default]
    Off,
    /// Every read-only data object with local linkage: the backend promises that
    /// no such object's address is compared with another's.
    LocalReadOnly,
    /// The listed read-only data objects (of any linkage): the backend knows
    /// their addresses are insignificant.
    Listed(Vec<DataId>),
}

/// Everything two data objects must agree on to fold, comparable and hashable.
#[derive(PartialEq, Eq, Hash)]
struct DataKey<'a> {
    tls: bool,
    contents: Option<&'a [u8]>,
    size: usize,
    align: Option<u64>,
    section: Option<&'a str>,
    used: bool,
    function_relocs: Vec<(u32, ExactTarget)>,
    data_relocs: Vec<(u32, ExactTarget, i64)>,
}

/// The key of `desc`, or `None` when it cannot fold (no contents yet).
fn key<'a>(desc: &'a DataDescription, tls: bool) -> Option<DataKey<'a>> {
    let (contents, size) = match &desc.init {
        Init::Uninitialized => return None,
        Init::Zeros { size } => (None, *size),
        Init::Bytes { contents } => (Some(&contents[..]), contents.len()),
    };
    Some(DataKey {
        tls,
        contents,
        size,
        align: desc.align,
        section: desc.custom_section.as_deref(),
        used: desc.used,
        function_relocs: desc
            .function_relocs
            .iter()
            .map(|&(offset, f)| (offset, ExactTarget::of(&desc.function_decls[f])))
            .collect(),
        data_relocs: desc
            .data_relocs
            .iter()
            .map(|&(offset, gv, addend)| (offset, ExactTarget::of(&desc.data_decls[gv]), addend))
            .collect(),
    })
}

/// The folds `merging` allows among `held` (in definition order): each
/// (duplicate, kept) pair, the kept one the first defined of its class.
pub(super) fn fold(
    held: &[(DataId, DataDescription)],
    declarations: &ModuleDeclarations,
    merging: &DataMerging,
) -> Vec<(DataId, DataId)> {
    let listed: HashSet<DataId> = match merging {
        DataMerging::Listed(ids) => ids.iter().copied().collect(),
        DataMerging::Off | DataMerging::LocalReadOnly => HashSet::new(),
    };
    let allowed = |id: DataId| {
        let decl = declarations.get_data_decl(id);
        !decl.writable
            && match merging {
                DataMerging::Off => false,
                DataMerging::LocalReadOnly => decl.linkage == Linkage::Local,
                DataMerging::Listed(_) => listed.contains(&id),
            }
    };
    let mut kept: HashMap<DataKey<'_>, DataId> = HashMap::new();
    let mut folds = Vec::new();
    for (id, desc) in held {
        if !allowed(*id) {
            continue;
        }
        let Some(key) = key(desc, declarations.get_data_decl(*id).tls) else {
            continue;
        };
        match kept.get(&key) {
            Some(&first) => folds.push((*id, first)),
            None => {
                kept.insert(key, *id);
            }
        }
    }
    folds
}
