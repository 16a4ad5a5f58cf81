//! The dataset and loader on small IDX files written here: batches, normalisation, shuffling
//! determinism, the end of an epoch, and errors for hostile files.
use chutney::data::{Dataset, Loader, LoaderOptions};
use chutney::{Dtype, Status, Tensor};
use std::path::PathBuf;

fn write_idx(n: usize, rows: usize, cols: usize) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("chutney-rust-data-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut img = vec![0, 0, 8, 3];
    for d in [n, rows, cols] {
        img.extend_from_slice(&(d as u32).to_be_bytes());
    }
    for i in 0..n * rows * cols {
        img.push((i % 251) as u8);
    }
    let mut lab = vec![0, 0, 8, 1];
    lab.extend_from_slice(&(n as u32).to_be_bytes());
    for i in 0..n {
        lab.push((i % 10) as u8);
    }
    let (ip, lp) = (dir.join("images-idx3-ubyte"), dir.join("labels-idx1-ubyte"));
    std::fs::write(&ip, img).unwrap();
    std::fs::write(&lp, lab).unwrap();
    (ip, lp)
}

#[test]
fn datasets_and_loaders() {
    let (ip, lp) = write_idx(10, 3, 2);
    let ds = Dataset::open_idx(&ip, &lp).unwrap();
    let info = ds.info().unwrap();
    assert_eq!((info.count, info.rows, info.cols, info.num_classes), (10, 3, 2, 10));
    let (px, label) = ds.get(1).unwrap();
    assert_eq!(px, vec![6, 7, 8, 9, 10, 11]);
    assert_eq!(label, 1);
    assert_eq!(ds.get(10).unwrap_err().status(), Status::INVALID_ARGUMENT);

    for synchronous in [true, false] {
        let o = LoaderOptions { flat: true, synchronous, num_workers: 2, ..LoaderOptions::new(4) };
        let mut l = Loader::new(&ds, &o).unwrap();
        assert_eq!(l.num_batches().unwrap(), 3);
        let (mut x, mut y) = l.batch().unwrap();
        assert_eq!(x.shape().unwrap(), vec![4, 6]);
        assert_eq!(y.dtype().unwrap(), Dtype::I32);
        let mut sizes = Vec::new();
        let mut first = Vec::new();
        loop {
            let n = l.next(&mut x, &mut y).unwrap();
            if n == 0 {
                break;
            }
            if sizes.is_empty() {
                first = x.to_vec::<f32>().unwrap();
                assert_eq!(y.to_vec::<i32>().unwrap(), vec![0, 1, 2, 3]);
            }
            sizes.push(n);
        }
        assert_eq!(sizes, vec![4, 4, 2]);
        assert_eq!(first[7], 7.0 / 255.0, "pixel 1 of sample 1, unshuffled, mean 0 std 1");
        assert_eq!(l.stats().unwrap().samples, 10);
        // a tensor of the wrong shape is refused
        let mut bad = Tensor::zeros(Dtype::F32, &[3, 6]).unwrap();
        l.reset(0).unwrap();
        assert_eq!(l.next(&mut bad, &mut y).unwrap_err().status(), Status::SHAPE);
    }

    // shuffling depends only on (seed, epoch)
    let order = |seed: u64, epoch: i64| {
        let o = LoaderOptions { shuffle: true, seed, flat: true, ..LoaderOptions::new(10) };
        let mut l = Loader::new(&ds, &o).unwrap();
        l.reset(epoch).unwrap();
        let (mut x, mut y) = l.batch().unwrap();
        l.next(&mut x, &mut y).unwrap();
        y.to_vec::<i32>().unwrap()
    };
    assert_eq!(order(5, 1), order(5, 1));
    assert_ne!(order(5, 1), order(5, 2));
    let mut sorted = order(5, 1);
    sorted.sort_unstable();
    assert_eq!(sorted, (0..10).collect::<Vec<i32>>());

    assert_eq!(Loader::new(&ds, &LoaderOptions::new(0)).unwrap_err().status(), Status::INVALID_ARGUMENT);
    std::fs::write(&ip, b"\0\0\x08\x03garbage").unwrap();
    assert_eq!(Dataset::open_idx(&ip, &lp).unwrap_err().status(), Status::CORRUPT);
    assert_eq!(Dataset::open_idx(&ip.with_extension("none"), &lp).unwrap_err().status(), Status::IO);
    assert_eq!(Dataset::fashion_mnist(None, "validation").unwrap_err().status(), Status::INVALID_ARGUMENT);
}
