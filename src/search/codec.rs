//! The binary format of the search index's snapshots on disk: little-endian values written
//! through a SHA-256 of every byte, which ends the file, so a truncated or damaged file is
//! refused on reading. Files are written under a name of their own and renamed into place.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Longest string (agent id, content hash, embedder id, file name) read back.
const MAX_KEY_BYTES: u32 = 256;

/// Writes values, hashing every byte.
pub(crate) struct Encoder<W: Write> {
    out: W,
    digest: Sha256,
}

impl<W: Write> Encoder<W> {
    pub fn bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.digest.update(bytes);
        self.out.write_all(bytes)
    }

    pub fn u8(&mut self, value: u8) -> std::io::Result<()> {
        self.bytes(&[value])
    }

    pub fn u32(&mut self, value: u32) -> std::io::Result<()> {
        self.bytes(&value.to_le_bytes())
    }

    pub fn u64(&mut self, value: u64) -> std::io::Result<()> {
        self.bytes(&value.to_le_bytes())
    }

    pub fn f32(&mut self, value: f32) -> std::io::Result<()> {
        self.bytes(&value.to_le_bytes())
    }

    pub fn len(&mut self, len: usize) -> std::io::Result<()> {
        self.u64(len as u64)
    }

    pub fn str(&mut self, value: &str) -> std::io::Result<()> {
        self.u32(u32::try_from(value.len()).unwrap_or(u32::MAX))?;
        self.bytes(value.as_bytes())
    }

    pub fn u8s(&mut self, values: &[u8]) -> std::io::Result<()> {
        self.len(values.len())?;
        self.bytes(values)
    }

    pub fn i8s(&mut self, values: &[i8]) -> std::io::Result<()> {
        self.len(values.len())?;
        // In pieces, as the lists below: the codes of a million vectors are a quarter of a
        // gigabyte, and a copy of them whole was the peak of a start that saves a snapshot.
        for chunk in values.chunks(64 * 1024) {
            let bytes: Vec<u8> = chunk.iter().map(|v| *v as u8).collect();
            self.bytes(&bytes)?;
        }
        Ok(())
    }

    pub fn u32s(&mut self, values: &[u32]) -> std::io::Result<()> {
        self.len(values.len())?;
        for chunk in values.chunks(16 * 1024) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.bytes(&bytes)?;
        }
        Ok(())
    }

    pub fn f32s(&mut self, values: &[f32]) -> std::io::Result<()> {
        self.len(values.len())?;
        for chunk in values.chunks(16 * 1024) {
            let bytes: Vec<u8> = chunk.iter().flat_map(|v| v.to_le_bytes()).collect();
            self.bytes(&bytes)?;
        }
        Ok(())
    }
}

/// Reads values, hashing every byte; every length is checked against `limit` before anything
/// is allocated for it.
pub(crate) struct Decoder<R: Read> {
    input: R,
    digest: Sha256,
    /// Most elements any one list may have (the file's size bounds it anyway).
    limit: u64,
}

pub(crate) type Decoded<T> = Result<T, String>;

impl<R: Read> Decoder<R> {
    pub fn fill(&mut self, buffer: &mut [u8]) -> Decoded<()> {
        self.input
            .read_exact(buffer)
            .map_err(|err| format!("truncated: {err}"))?;
        self.digest.update(&*buffer);
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Decoded<[u8; N]> {
        let mut buffer = [0u8; N];
        self.fill(&mut buffer)?;
        Ok(buffer)
    }

    pub fn u8(&mut self) -> Decoded<u8> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u32(&mut self) -> Decoded<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Decoded<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn f32(&mut self) -> Decoded<f32> {
        Ok(f32::from_le_bytes(self.array()?))
    }

    pub fn len(&mut self) -> Decoded<usize> {
        let len = self.u64()?;
        if len > self.limit {
            return Err(format!("a list of {len} elements is longer than the file"));
        }
        Ok(len as usize)
    }

    pub fn str(&mut self) -> Decoded<String> {
        let len = self.u32()?;
        if len > MAX_KEY_BYTES {
            return Err(format!("a {len}-byte key is too long"));
        }
        let mut buffer = vec![0u8; len as usize];
        self.fill(&mut buffer)?;
        String::from_utf8(buffer).map_err(|_| "a key is not UTF-8".to_owned())
    }

    pub fn u8s(&mut self) -> Decoded<Vec<u8>> {
        let len = self.len()?;
        let mut buffer = vec![0u8; len];
        self.fill(&mut buffer)?;
        Ok(buffer)
    }

    pub fn i8s(&mut self) -> Decoded<Vec<i8>> {
        Ok(self.u8s()?.into_iter().map(|v| v as i8).collect())
    }

    pub fn u32s(&mut self) -> Decoded<Vec<u32>> {
        let len = self.len()?;
        let mut values = Vec::with_capacity(len);
        let mut buffer = vec![0u8; 4 * len.min(16 * 1024)];
        let mut left = len;
        while left > 0 {
            let take = left.min(16 * 1024);
            self.fill(&mut buffer[..4 * take])?;
            values.extend(
                buffer[..4 * take]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            left -= take;
        }
        Ok(values)
    }

    pub fn f32s(&mut self) -> Decoded<Vec<f32>> {
        Ok(self.u32s()?.into_iter().map(f32::from_bits).collect())
    }
}

impl Encoder<BufWriter<File>> {
    /// Start writing `path` through a temporary file beside it (of its own name, so processes
    /// sharing a data directory never write into each other's); `finish` renames it into place.
    pub fn create(path: &Path) -> std::io::Result<(Self, PathBuf)> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let partial = path.with_extension(format!("partial-{}", ulid::Ulid::new()));
        let encoder = Encoder {
            out: BufWriter::new(File::create(&partial)?),
            digest: Sha256::new(),
        };
        Ok((encoder, partial))
    }

    /// End the file with its checksum, make it durable and move it to `path`.
    pub fn finish(mut self, partial: &Path, path: &Path) -> std::io::Result<()> {
        let digest = std::mem::take(&mut self.digest).finalize();
        self.out.write_all(&digest)?;
        let file = self.out.into_inner().map_err(|err| err.into_error())?;
        file.sync_all()?;
        std::fs::rename(partial, path)
    }
}

impl Decoder<BufReader<File>> {
    /// Read `path`; no list may claim more elements than the file has bytes.
    pub fn open(path: &Path) -> Decoded<Self> {
        let file = File::open(path).map_err(|err| format!("cannot open: {err}"))?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        Ok(Decoder {
            input: BufReader::with_capacity(1 << 20, file),
            digest: Sha256::new(),
            limit: size,
        })
    }

    /// Check the checksum that ends the file against everything read before it.
    pub fn finish(mut self) -> Decoded<()> {
        let computed = std::mem::take(&mut self.digest).finalize();
        let mut stored = [0u8; 32];
        self.input
            .read_exact(&mut stored)
            .map_err(|_| "truncated: no checksum".to_owned())?;
        if stored[..] != computed[..] {
            return Err("the checksum does not match".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_written_in_pieces_read_back_whole_and_checked() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("lists");
        // Several pieces and a part-full last one.
        let codes: Vec<i8> = (0..200_000).map(|n| (n % 256) as u8 as i8).collect();
        let links: Vec<u32> = (0..40_000).map(|n| n * 7).collect();
        let (mut out, partial) = Encoder::create(&path).expect("create");
        out.i8s(&codes).expect("codes");
        out.u32s(&links).expect("links");
        out.finish(&partial, &path).expect("finish");
        let mut input = Decoder::open(&path).expect("open");
        assert_eq!(input.i8s().expect("codes"), codes);
        assert_eq!(input.u32s().expect("links"), links);
        input.finish().expect("the checksum matches");
    }
}
