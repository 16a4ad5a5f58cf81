//! IDX datasets (Fashion-MNIST) and the batching loader.
use crate::checkpoint::path_cstring;
use crate::error::{check, cstring, Result};
use crate::tensor::Tensor;
use chutney_sys as sys;
use std::path::Path;
use std::ptr;

/// Size and classes of a dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatasetInfo {
    /// Largest label + 1.
    pub num_classes: u32,
    /// Number of samples.
    pub count: i64,
    /// Image height.
    pub rows: i32,
    /// Image width.
    pub cols: i32,
}

/// Images and labels in memory (`ctn_dataset`), immutable: `Send + Sync`.
pub struct Dataset {
    ptr: *mut sys::ctn_dataset,
}

// SAFETY: datasets are immutable; every function on them is thread-safe (data.h).
unsafe impl Send for Dataset {}
// SAFETY: as above.
unsafe impl Sync for Dataset {}

release_on_drop!(Dataset => sys::ctn_dataset_release); // we own our reference (loaders keep their own).

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dataset({:?})", self.info().ok())
    }
}

impl Dataset {
    /// Opens an IDX image file and label file (plain or gzip).
    pub fn open_idx(images: &Path, labels: &Path) -> Result<Dataset> {
        let (i, l) = (path_cstring(images)?, path_cstring(labels)?);
        let mut out = ptr::null_mut();
        // SAFETY: strings outlive the call.
        check(unsafe { sys::ctn_dataset_open_idx(i.as_ptr(), l.as_ptr(), &mut out) })?;
        Ok(Dataset { ptr: out })
    }

    /// Opens Fashion-MNIST split "train" or "test" from `dir` (None: Debian's
    /// dataset-fashion-mnist folder).
    pub fn fashion_mnist(dir: Option<&Path>, split: &str) -> Result<Dataset> {
        let d = dir.map(path_cstring).transpose()?;
        let s = cstring(split, "split")?;
        let mut out = ptr::null_mut();
        // SAFETY: strings outlive the call.
        check(unsafe {
            sys::ctn_dataset_open_fashion_mnist(d.as_ref().map_or(ptr::null(), |d| d.as_ptr()), s.as_ptr(), &mut out)
        })?;
        Ok(Dataset { ptr: out })
    }

    /// Size and classes.
    pub fn info(&self) -> Result<DatasetInfo> {
        let mut i = sys::ctn_dataset_info {
            struct_size: std::mem::size_of::<sys::ctn_dataset_info>() as u32,
            ..Default::default()
        };
        // SAFETY: i is sized by struct_size.
        check(unsafe { sys::ctn_dataset_info_get(self.ptr, &mut i) })?;
        Ok(DatasetInfo { num_classes: i.num_classes, count: i.count, rows: i.rows, cols: i.cols })
    }

    /// Sample `index`: raw u8 pixels (rows * cols) and its label.
    pub fn get(&self, index: i64) -> Result<(Vec<u8>, i32)> {
        let i = self.info()?;
        let mut px = vec![0u8; (i.rows.max(0) as usize) * (i.cols.max(0) as usize)];
        let mut label = 0;
        // SAFETY: px holds rows * cols bytes; the library checks the index.
        check(unsafe { sys::ctn_dataset_get(self.ptr, index, px.as_mut_ptr(), &mut label) })?;
        Ok((px, label))
    }
}

/// Options of [`Loader::new`]; `LoaderOptions::new(batch_size)` for the defaults.
#[derive(Debug, Clone, Default)]
pub struct LoaderOptions {
    /// Samples per batch (>= 1).
    pub batch_size: i32,
    /// A new permutation each epoch.
    pub shuffle: bool,
    /// Skip a final partial batch.
    pub drop_last: bool,
    /// Images as `[B, rows*cols]` instead of `[B, 1, rows, cols]`.
    pub flat: bool,
    /// Random horizontal flips.
    pub hflip: bool,
    /// No worker threads.
    pub synchronous: bool,
    /// Random-crop padding (0: off).
    pub crop_padding: i32,
    /// Shuffling and augmentation seed.
    pub seed: u64,
    /// Normalisation: (u8 / 255 - mean) / std.
    pub mean: f64,
    /// Normalisation std (0 means 1).
    pub std: f64,
    /// Worker threads (0: 1).
    pub num_workers: i32,
    /// Batches assembled ahead (0: default).
    pub prefetch: i32,
    /// This rank's shard, `0 <= shard_index < shard_count` (ABI 1.2, docs/DISTRIBUTED.md).
    pub shard_index: i32,
    /// Number of shards (0 or 1: none); needs `drop_last` (ABI 1.2).
    pub shard_count: i32,
}

impl LoaderOptions {
    /// Defaults with `batch_size`.
    pub fn new(batch_size: i32) -> LoaderOptions {
        LoaderOptions { batch_size, ..Default::default() }
    }
}

/// Loader statistics (`ctn_loader_stats`).
pub type LoaderStats = sys::ctn_loader_stats;

/// A batching loader (`ctn_loader`) with prefetching worker threads, released (threads joined)
/// on drop. `Send`, not `Sync`: one consumer at a time. It keeps its own reference to the
/// dataset.
pub struct Loader {
    ptr: *mut sys::ctn_loader,
    _not_sync: std::marker::PhantomData<std::cell::Cell<()>>,
}

// SAFETY: one consumer thread at a time per loader (data.h); any thread.
unsafe impl Send for Loader {}

release_on_drop!(Loader => sys::ctn_loader_release);

impl std::fmt::Debug for Loader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Loader({:p})", self.ptr)
    }
}

impl Loader {
    /// Creates a loader over `ds` and starts epoch 0.
    pub fn new(ds: &Dataset, o: &LoaderOptions) -> Result<Loader> {
        let mut flags = 0;
        for (on, f) in [
            (o.shuffle, sys::CTN_LOADER_SHUFFLE),
            (o.drop_last, sys::CTN_LOADER_DROP_LAST),
            (o.flat, sys::CTN_LOADER_FLAT),
            (o.hflip, sys::CTN_LOADER_HFLIP),
            (o.synchronous, sys::CTN_LOADER_SYNCHRONOUS),
        ] {
            if on {
                flags |= f;
            }
        }
        let raw = sys::ctn_loader_options {
            struct_size: std::mem::size_of::<sys::ctn_loader_options>() as u32,
            flags,
            batch_size: o.batch_size,
            crop_padding: o.crop_padding,
            seed: o.seed,
            mean: o.mean,
            std: o.std,
            num_workers: o.num_workers,
            prefetch: o.prefetch,
            shard_index: o.shard_index,
            shard_count: o.shard_count,
        };
        let mut out = ptr::null_mut();
        // SAFETY: the library takes its own dataset reference.
        check(unsafe { sys::ctn_loader_create(ds.ptr, &raw, &mut out) })?;
        Ok(Loader { ptr: out, _not_sync: std::marker::PhantomData })
    }

    /// A pair (images, labels) of the shapes [`Loader::next`] fills.
    pub fn batch(&mut self) -> Result<(Tensor, Tensor)> {
        let (mut i, mut l) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: valid handle and out-pointers.
        check(unsafe { sys::ctn_loader_batch_create(self.ptr, &mut i, &mut l) })?;
        // SAFETY: two new handles we own.
        Ok(unsafe { (Tensor::from_raw(i), Tensor::from_raw(l)) })
    }

    /// Copies the next batch into `images` and `labels`; returns its size (0 at the end of
    /// the epoch, the tensors then untouched).
    pub fn next(&mut self, images: &mut Tensor, labels: &mut Tensor) -> Result<usize> {
        let mut n = 0;
        // SAFETY: exclusive borrows of both tensors; the library checks shapes and dtypes.
        check(unsafe { sys::ctn_loader_next(self.ptr, images.ptr, labels.ptr, &mut n) })?;
        Ok(n as usize)
    }

    /// Starts epoch `epoch` from its first batch.
    pub fn reset(&mut self, epoch: i64) -> Result<()> {
        // SAFETY: valid handle.
        check(unsafe { sys::ctn_loader_reset(self.ptr, epoch) })
    }

    /// Batches per epoch.
    pub fn num_batches(&self) -> Result<i64> {
        let mut n = 0;
        // SAFETY: valid handle.
        check(unsafe { sys::ctn_loader_num_batches(self.ptr, &mut n) })?;
        Ok(n)
    }

    /// Cumulative statistics.
    pub fn stats(&self) -> Result<LoaderStats> {
        let mut s = LoaderStats { struct_size: std::mem::size_of::<LoaderStats>() as u32, ..Default::default() };
        // SAFETY: s is sized by struct_size.
        check(unsafe { sys::ctn_loader_stats_get(self.ptr, &mut s) })?;
        Ok(s)
    }
}
