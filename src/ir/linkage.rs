//! [`Linkage`]: how visible a function is outside its module, the pass's own copy
//! of `cranelift_module::Linkage` (the core does not depend on cranelift-module;
//! with the `module` feature the two convert into each other).

/// How visible a function is outside the module, and whether the linker may
/// replace it. The same five cases as `cranelift_module::Linkage`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Linkage {
    /// Defined outside the module.
    Import,
    /// Defined inside the module, visible only inside it (the default).
    #[default]
    Local,
    /// Defined inside the module, visible outside it, and the linker may replace it
    /// with another definition.
    Preemptible,
    /// Defined inside the module, visible inside the linked object only.
    Hidden,
    /// Defined inside the module, visible everywhere.
    Export,
}

#[cfg(feature = "module")]
impl From<cranelift_module::Linkage> for Linkage {
    fn from(linkage: cranelift_module::Linkage) -> Self {
        match linkage {
            cranelift_module::Linkage::Import => Self::Import,
            cranelift_module::Linkage::Local => Self::Local,
            cranelift_module::Linkage::Preemptible => Self::Preemptible,
            cranelift_module::Linkage::Hidden => Self::Hidden,
            cranelift_module::Linkage::Export => Self::Export,
        }
    }
}

#[cfg(feature = "module")]
impl From<Linkage> for cranelift_module::Linkage {
    fn from(linkage: Linkage) -> Self {
        match linkage {
            Linkage::Import => Self::Import,
            Linkage::Local => Self::Local,
            Linkage::Preemptible => Self::Preemptible,
            Linkage::Hidden => Self::Hidden,
            Linkage::Export => Self::Export,
        }
    }
}
