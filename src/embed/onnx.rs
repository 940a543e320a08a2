//! Just enough of the ONNX file format to take a model's weights and its nodes' wiring out of a
//! `model.onnx`: a protobuf reader for the `ModelProto → GraphProto → NodeProto / TensorProto`
//! fields that carry them. Nothing here runs a graph; `bge` rebuilds the network in candle.
//!
//! Field numbers are those of `onnx.proto3` (ONNX 1.x), stable since IR version 3.

use std::collections::HashMap;

/// A graph's nodes (in file order) and its initialisers (named constant tensors).
#[derive(Debug, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub initializers: HashMap<String, TensorData>,
}

/// One operator: its type and the names of the values it reads and writes.
#[derive(Debug, Default, Clone)]
pub struct Node {
    pub op_type: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

/// A constant tensor as stored: its shape, element type and whichever encoding the writer chose
/// (`raw_data` bytes, or the typed repeated fields).
#[derive(Debug, Default)]
pub struct TensorData {
    pub dims: Vec<usize>,
    pub data_type: i32,
    raw: Vec<u8>,
    floats: Vec<f32>,
    ints: Vec<i64>,
}

/// ONNX element types this reader decodes.
pub const FLOAT: i32 = 1;
pub const UINT8: i32 = 2;
pub const INT8: i32 = 3;

impl TensorData {
    /// Number of elements its shape holds (1 for a scalar).
    pub fn element_count(&self) -> usize {
        self.dims.iter().product()
    }

    /// The elements of a `FLOAT` tensor.
    pub fn to_f32(&self) -> Result<Vec<f32>, String> {
        if self.data_type != FLOAT {
            return Err(format!(
                "expected float data, found type {}",
                self.data_type
            ));
        }
        let values = if self.raw.is_empty() {
            self.floats.clone()
        } else {
            self.raw
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect()
        };
        self.checked(values)
    }

    /// The elements of a `UINT8` or `INT8` tensor, widened.
    pub fn to_i32(&self) -> Result<Vec<i32>, String> {
        let values: Vec<i32> = match (self.data_type, self.raw.is_empty()) {
            (UINT8, false) => self.raw.iter().map(|b| i32::from(*b)).collect(),
            (INT8, false) => self.raw.iter().map(|b| i32::from(*b as i8)).collect(),
            // The typed field holds 8-bit values widened to int32.
            (UINT8 | INT8, true) => self.ints.iter().map(|v| *v as i32).collect(),
            (other, _) => return Err(format!("expected 8-bit integer data, found type {other}")),
        };
        self.checked(values)
    }

    fn checked<T>(&self, values: Vec<T>) -> Result<Vec<T>, String> {
        if values.len() == self.element_count() {
            Ok(values)
        } else {
            Err(format!(
                "holds {} values for shape {:?}",
                values.len(),
                self.dims
            ))
        }
    }
}

/// Reads the graph of a serialised `ModelProto`.
pub fn read_graph(model: &[u8]) -> Result<Graph, String> {
    let mut graph = None;
    for field in Fields::new(model) {
        if let (7, Value::Bytes(bytes)) = field? {
            graph = Some(bytes);
        }
    }
    let graph = graph.ok_or("the file holds no graph")?;
    let mut out = Graph::default();
    for field in Fields::new(graph) {
        match field? {
            (1, Value::Bytes(bytes)) => out.nodes.push(read_node(bytes)?),
            (5, Value::Bytes(bytes)) => {
                let (name, tensor) = read_tensor(bytes)?;
                out.initializers.insert(name, tensor);
            }
            _ => {}
        }
    }
    Ok(out)
}

fn read_node(bytes: &[u8]) -> Result<Node, String> {
    let mut node = Node::default();
    for field in Fields::new(bytes) {
        match field? {
            (1, Value::Bytes(b)) => node.inputs.push(string(b)?),
            (2, Value::Bytes(b)) => node.outputs.push(string(b)?),
            (4, Value::Bytes(b)) => node.op_type = string(b)?,
            _ => {}
        }
    }
    Ok(node)
}

fn read_tensor(bytes: &[u8]) -> Result<(String, TensorData), String> {
    let mut name = String::new();
    let mut tensor = TensorData::default();
    for field in Fields::new(bytes) {
        match field? {
            (1, Value::Varint(v)) => tensor.dims.push(dim(v as i64)?),
            (1, Value::Bytes(b)) => {
                for v in packed_varints(b) {
                    tensor.dims.push(dim(v? as i64)?);
                }
            }
            (2, Value::Varint(v)) => tensor.data_type = v as i32,
            (4, Value::Fixed32(v)) => tensor.floats.push(f32::from_bits(v)),
            (4, Value::Bytes(b)) => tensor.floats.extend(
                b.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            ),
            // int32_data: int32 values are varints of their sign-extended 64 bits.
            (5, Value::Varint(v)) => tensor.ints.push(i64::from(v as i32)),
            (5, Value::Bytes(b)) => {
                for v in packed_varints(b) {
                    tensor.ints.push(i64::from(v? as i32));
                }
            }
            (8, Value::Bytes(b)) => name = string(b)?,
            (9, Value::Bytes(b)) => tensor.raw = b.to_vec(),
            _ => {}
        }
    }
    Ok((name, tensor))
}

fn dim(value: i64) -> Result<usize, String> {
    usize::try_from(value).map_err(|_| format!("negative dimension {value}"))
}

fn string(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a name is not UTF-8".to_owned())
}

/// One protobuf field's payload, by wire type.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

/// The fields of one protobuf message, in order; an error ends the walk.
struct Fields<'a> {
    buf: &'a [u8],
    failed: bool,
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, failed: false }
    }

    fn next_field(&mut self) -> Result<(u32, Value<'a>), String> {
        let key = varint(&mut self.buf)?;
        let number = u32::try_from(key >> 3).map_err(|_| "field number out of range")?;
        let value = match key & 7 {
            0 => Value::Varint(varint(&mut self.buf)?),
            1 => Value::Fixed64(u64::from_le_bytes(
                take(&mut self.buf, 8)?.try_into().unwrap_or_default(),
            )),
            2 => {
                let len =
                    usize::try_from(varint(&mut self.buf)?).map_err(|_| "length out of range")?;
                Value::Bytes(take(&mut self.buf, len)?)
            }
            5 => Value::Fixed32(u32::from_le_bytes(
                take(&mut self.buf, 4)?.try_into().unwrap_or_default(),
            )),
            other => return Err(format!("unsupported protobuf wire type {other}")),
        };
        Ok((number, value))
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        let field = self.next_field();
        self.failed = field.is_err();
        Some(field)
    }
}

fn take<'a>(buf: &mut &'a [u8], len: usize) -> Result<&'a [u8], String> {
    if buf.len() < len {
        return Err("the file is truncated".to_owned());
    }
    let (head, tail) = buf.split_at(len);
    *buf = tail;
    Ok(head)
}

fn varint(buf: &mut &[u8]) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = buf.split_first().ok_or("the file is truncated")?;
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a varint is longer than 10 bytes".to_owned())
}

fn packed_varints(mut buf: &[u8]) -> impl Iterator<Item = Result<u64, String>> + '_ {
    std::iter::from_fn(move || (!buf.is_empty()).then(|| varint(&mut buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(field: u32, wire: u32) -> u8 {
        (field << 3 | wire) as u8
    }

    fn message(parts: &[(u32, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (field, bytes) in parts {
            out.push(key(*field, 2));
            out.push(bytes.len() as u8);
            out.extend_from_slice(bytes);
        }
        out
    }

    #[test]
    fn reads_nodes_and_initialisers_in_either_encoding() {
        let node = message(&[(1, b"x"), (1, b"w"), (2, b"y"), (4, b"MatMulInteger")]);
        // dims [2] unpacked, INT8, raw bytes [-1, 5].
        let mut raw = vec![key(1, 0), 2, key(2, 0), INT8 as u8];
        raw.extend(message(&[(8, b"w"), (9, &[0xff, 5])]));
        // dims [] (a scalar), FLOAT in float_data, packed.
        let mut scale = vec![key(2, 0), FLOAT as u8];
        scale.extend(message(&[(8, b"s"), (4, &0.5f32.to_le_bytes())]));
        // dims [2] packed, UINT8 in int32_data, packed.
        let mut zero = message(&[(1, &[2]), (5, &[7, 200, 1])]);
        zero.extend([key(2, 0), UINT8 as u8]);
        zero.extend(message(&[(8, b"z")]));
        let graph = message(&[(1, &node), (5, &raw), (5, &scale), (5, &zero)]);
        let model = message(&[(7, &graph)]);

        let graph = read_graph(&model).expect("reads");
        assert_eq!(graph.nodes[0].op_type, "MatMulInteger");
        assert_eq!(graph.nodes[0].inputs, ["x", "w"]);
        assert_eq!(graph.initializers["w"].to_i32().expect("decodes"), [-1, 5]);
        assert_eq!(graph.initializers["s"].to_f32().expect("decodes"), [0.5]);
        assert_eq!(graph.initializers["z"].to_i32().expect("decodes"), [7, 200]);
        assert!(graph.initializers["s"].to_i32().is_err());
    }

    #[test]
    fn truncated_or_foreign_input_is_an_error_not_a_panic() {
        let graph = message(&[(1, &message(&[(4, b"Add")]))]);
        let model = message(&[(7, &graph)]);
        for cut in 0..model.len() {
            let _ = read_graph(&model[..cut]);
        }
        assert!(read_graph(b"").is_err());
        assert!(read_graph(&[0x0b]).is_err(), "wire type 3 is refused");
        assert!(
            read_graph(&[0x80; 12]).is_err(),
            "an endless varint is refused"
        );
        let mut tensor = message(&[(1, &[3]), (9, &[1])]);
        tensor.extend([key(2, 0), UINT8 as u8]);
        let wrong_count = message(&[(7, &message(&[(5, &tensor)]))]);
        let graph = read_graph(&wrong_count).expect("reads");
        let tensor = graph.initializers.values().next().expect("one");
        assert!(tensor.to_i32().is_err(), "3 elements declared, 1 stored");
    }
}
