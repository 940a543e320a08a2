//! The keyword index on disk, so a restart loads it instead of indexing every agent again
//! (most of a start at a million agents).
//!
//! The file holds the index's committed files and, for every document, the slot it is keyed
//! by, the agent's id and a hash of the text it was indexed from. Loading gives back the index
//! and that table; the search index then keeps the documents of agents whose text is the same,
//! re-indexes the changed ones and removes the rest. A file written with another text analysis
//! (schema, tokenizer, stemmer, stop words), truncated, or whose checksum fails is not used: the
//! index is built from the agents instead.
//!
//! Format (little-endian): magic, format version, the analysis fingerprint, the change-log
//! position at which it was saved (informational), the files (name and bytes), the slot table,
//! and a SHA-256 of everything before it.

use std::collections::HashSet;
use std::path::Path;

use sha2::{Digest, Sha256};
use tantivy::Index;
use tantivy::directory::error::OpenReadError;
use tantivy::directory::{Directory, OwnedBytes, RamDirectory};
use tantivy::tokenizer::TokenStream;

use super::{TextIndex, analyzer, schema};
use crate::search::codec::{Decoded, Decoder, Encoder};

const MAGIC: &[u8; 8] = b"ARTXTSNP";
const FORMAT: u32 = 1;
const META_FILE: &str = "meta.json";
/// A sample whose analysed terms key a snapshot to the analysis that wrote it: case, accents,
/// punctuation, stop words, stemming and the long-word limit all show in them.
const PROBE: &str = "The Weather-forecasting AGENTS aren't running: Zürich's naïve APIs return \
    404s, quickly summarizing PDFs and spreadsheets for developers; a b c the of and with \
    pneumonoultramicroscopicsilicovolcanoconiosisandmore";

/// One document of a saved index: its slot, whose it is, and a hash of the text indexed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedSlot {
    pub slot: u32,
    pub agent_id: String,
    pub text_hash: [u8; 32],
}

/// A snapshot as read: the index, ready to serve and to write to, and its documents.
pub struct Saved {
    pub index: TextIndex,
    pub slots: Vec<SavedSlot>,
    pub change_seq: i64,
}

/// The files of one commit of the index: cheap to take (the bytes are shared, not copied), so
/// the caller can take them with writes held off and write them to disk after.
pub struct CommittedFiles {
    files: Vec<(String, OwnedBytes)>,
}

/// Names the schema and the text analysis: a snapshot made with others is not used.
fn fingerprint() -> String {
    let mut digest = Sha256::new();
    let (schema, _) = schema();
    digest.update(serde_json::to_vec(&schema).unwrap_or_default());
    let mut analyzer = analyzer();
    let mut stream = analyzer.token_stream(PROBE);
    while let Some(token) = stream.next() {
        digest.update(token.text.as_bytes());
        digest.update(token.position.to_le_bytes());
        digest.update([0]);
    }
    hex::encode(&digest.finalize()[..16])
}

fn io_error(err: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(err.to_string())
}

impl TextIndex {
    /// The files of the last commit. A background merge may finish meanwhile and delete the
    /// files of the segments it merged, so the commit's meta file is read before and after:
    /// the files read belong to it only if it did not change.
    pub fn committed_files(&self) -> std::io::Result<CommittedFiles> {
        let meta_path = Path::new(META_FILE);
        for _ in 0..5 {
            let meta = self.directory.atomic_read(meta_path).map_err(io_error)?;
            let metas = self.index.load_metas().map_err(io_error)?;
            let mut files = vec![(META_FILE.to_owned(), OwnedBytes::new(meta.clone()))];
            for segment in &metas.segments {
                // Some of a segment's possible files do not exist (no deletes, say).
                for path in segment.list_files() {
                    match self.directory.open_read(&path) {
                        Ok(slice) => files.push((
                            path.to_string_lossy().into_owned(),
                            slice.read_bytes().map_err(io_error)?,
                        )),
                        Err(OpenReadError::FileDoesNotExist(_)) => {}
                        Err(err) => return Err(io_error(err)),
                    }
                }
            }
            if self.directory.atomic_read(meta_path).map_err(io_error)? == meta {
                return Ok(CommittedFiles { files });
            }
        }
        Err(io_error(
            "the keyword index kept changing while it was being saved",
        ))
    }

    /// Read a snapshot written by `CommittedFiles::save`. `Err` says why it cannot be used.
    pub fn load(path: &Path) -> Decoded<Saved> {
        let mut input = Decoder::open(path)?;
        let mut magic = [0u8; 8];
        input.fill(&mut magic)?;
        if &magic != MAGIC || input.u32()? != FORMAT {
            return Err("not a keyword index snapshot of this format".to_owned());
        }
        if input.str()? != fingerprint() {
            return Err("made with another text analysis".to_owned());
        }
        let change_seq = input.u64()? as i64;
        let directory = RamDirectory::create();
        for _ in 0..input.len()? {
            let name = input.str()?;
            if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\']) {
                return Err(format!("a file is named {name:?}"));
            }
            let bytes = input.u8s()?;
            directory
                .atomic_write(Path::new(&name), &bytes)
                .map_err(|err| format!("cannot hold a file: {err}"))?;
        }
        let count = input.len()?;
        let mut slots = Vec::with_capacity(count);
        let mut seen = HashSet::with_capacity(count);
        for _ in 0..count {
            let slot = input.u32()?;
            let agent_id = input.str()?;
            let mut text_hash = [0u8; 32];
            input.fill(&mut text_hash)?;
            if !seen.insert(slot) {
                return Err(format!("slot {slot} is saved twice"));
            }
            slots.push(SavedSlot {
                slot,
                agent_id,
                text_hash,
            });
        }
        input.finish()?;
        let index = Index::open(directory.clone()).map_err(|err| format!("cannot open: {err}"))?;
        let (schema, fields) = schema();
        if index.schema() != schema {
            return Err("made with another schema".to_owned());
        }
        let index = TextIndex::over(index, directory, fields)
            .map_err(|err| format!("cannot serve: {err}"))?;
        let live = index.stats().live_docs;
        if live != slots.len() as u64 {
            return Err(format!("{live} documents but {} saved slots", slots.len()));
        }
        Ok(Saved {
            index,
            slots,
            change_seq,
        })
    }
}

impl CommittedFiles {
    /// Write them to `path` with `slots` (every document's slot, agent and text hash as of the
    /// same commit), through a temporary file renamed into place.
    pub fn save(&self, path: &Path, change_seq: i64, slots: &[SavedSlot]) -> std::io::Result<()> {
        let (mut out, partial) = Encoder::create(path)?;
        let written = self
            .write(&mut out, change_seq, slots)
            .and_then(|()| out.finish(&partial, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        written
    }

    fn write<W: std::io::Write>(
        &self,
        out: &mut Encoder<W>,
        change_seq: i64,
        slots: &[SavedSlot],
    ) -> std::io::Result<()> {
        out.bytes(MAGIC)?;
        out.u32(FORMAT)?;
        out.str(&fingerprint())?;
        out.u64(change_seq as u64)?;
        out.len(self.files.len())?;
        for (name, bytes) in &self.files {
            out.str(name)?;
            out.u8s(bytes.as_slice())?;
        }
        out.len(slots.len())?;
        for slot in slots {
            out.u32(slot.slot)?;
            out.str(&slot.agent_id)?;
            out.bytes(&slot.text_hash)?;
        }
        Ok(())
    }

    /// Bytes in all, for logs.
    pub fn bytes(&self) -> usize {
        self.files.iter().map(|(_, bytes)| bytes.len()).sum()
    }
}
