//! Arrow columns of a UDF call: the argument columns built from one batch of records' values,
//! and the result column read back, checked against the declared type.

use anyhow::{bail, Result};
use arrow_array::builder::{BinaryBuilder, BooleanBuilder, PrimitiveBuilder, StringBuilder};
use arrow_array::types::{
    ArrowPrimitiveType, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, BooleanArray, PrimitiveArray, StringArray};
use arrow_data::ArrayData;
use arrow_schema::DataType;
use hotlist_operators::udf::{Arg, Scalar};

/// Arrow's type for a scalar (strings and bytes with 32-bit offsets, as the plugin reads them).
pub fn data_type(s: Scalar) -> DataType {
    match s {
        Scalar::Bool => DataType::Boolean,
        Scalar::I8 => DataType::Int8,
        Scalar::I16 => DataType::Int16,
        Scalar::I32 => DataType::Int32,
        Scalar::I64 => DataType::Int64,
        Scalar::U8 => DataType::UInt8,
        Scalar::U16 => DataType::UInt16,
        Scalar::U32 => DataType::UInt32,
        Scalar::U64 => DataType::UInt64,
        Scalar::F32 => DataType::Float32,
        Scalar::F64 => DataType::Float64,
        Scalar::Utf8 => DataType::Utf8,
        Scalar::Binary => DataType::Binary,
    }
}

/// The column of type `s` holding `values` (each already checked to fit `s`: see
/// [`hotlist_operators::udf::arg_of`]).
pub fn column(s: Scalar, values: &[Arg<'_>]) -> ArrayData {
    fn ints<T: ArrowPrimitiveType>(values: &[Arg<'_>], conv: impl Fn(i128) -> T::Native) -> ArrayData {
        let mut b = PrimitiveBuilder::<T>::with_capacity(values.len());
        for v in values {
            b.append_option(match v {
                Arg::Int(i) => Some(conv(*i)),
                _ => None,
            });
        }
        b.finish().into_data()
    }
    // `as` below narrows values `arg_of` checked to be in range
    match s {
        Scalar::Bool => {
            let mut b = BooleanBuilder::with_capacity(values.len());
            for v in values {
                b.append_option(match v {
                    Arg::Bool(x) => Some(*x),
                    _ => None,
                });
            }
            b.finish().into_data()
        }
        Scalar::I8 => ints::<Int8Type>(values, |i| i as i8),
        Scalar::I16 => ints::<Int16Type>(values, |i| i as i16),
        Scalar::I32 => ints::<Int32Type>(values, |i| i as i32),
        Scalar::I64 => ints::<Int64Type>(values, |i| i as i64),
        Scalar::U8 => ints::<UInt8Type>(values, |i| i as u8),
        Scalar::U16 => ints::<UInt16Type>(values, |i| i as u16),
        Scalar::U32 => ints::<UInt32Type>(values, |i| i as u32),
        Scalar::U64 => ints::<UInt64Type>(values, |i| i as u64),
        Scalar::F32 => floats::<Float32Type>(values, |f| f as f32),
        Scalar::F64 => floats::<Float64Type>(values, |f| f),
        Scalar::Utf8 => {
            let bytes = values
                .iter()
                .map(|v| if let Arg::Str(s) = v { s.len() } else { 0 })
                .sum();
            let mut b = StringBuilder::with_capacity(values.len(), bytes);
            for v in values {
                b.append_option(if let Arg::Str(s) = v { Some(s.as_ref()) } else { None });
            }
            b.finish().into_data()
        }
        Scalar::Binary => {
            let bytes = values
                .iter()
                .map(|v| if let Arg::Str(s) = v { s.len() } else { 0 })
                .sum();
            let mut b = BinaryBuilder::with_capacity(values.len(), bytes);
            for v in values {
                b.append_option(if let Arg::Str(s) = v { Some(s.as_bytes()) } else { None });
            }
            b.finish().into_data()
        }
    }
}

fn floats<T: ArrowPrimitiveType>(values: &[Arg<'_>], conv: impl Fn(f64) -> T::Native) -> ArrayData {
    let mut b = PrimitiveBuilder::<T>::with_capacity(values.len());
    for v in values {
        b.append_option(match v {
            Arg::Float(f) => Some(conv(*f)),
            _ => None,
        });
    }
    b.finish().into_data()
}

/// One result value: what ids, dims and filters are made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Out<'a> {
    /// Null (an argument was missing, or the UDF returned `None`).
    Null,
    /// A string.
    Str(&'a str),
    /// An integer.
    Int(i128),
    /// A boolean.
    Bool(bool),
}

/// A UDF's result column, checked: its type is the declared one and it has `rows` values.
pub struct Results {
    column: Column,
}

/// The result column by kind (downcast once per batch, not per row).
enum Column {
    Str(StringArray),
    Bool(BooleanArray),
    Int(ArrayRef),
    /// Bytes: no use takes them (refused at start).
    Other,
}

impl Results {
    /// Checks `data` against the declared result type `ret` and the batch's `rows`.
    pub fn check(data: ArrayData, ret: Scalar, rows: usize) -> Result<Results> {
        let want = data_type(ret);
        if *data.data_type() != want {
            bail!(
                "returned a column of {}, but its source declares {want}: is the library built from that source?",
                data.data_type()
            );
        }
        if data.len() != rows {
            bail!("returned {} values for {rows} records", data.len());
        }
        data.validate_full()
            .map_err(|e| anyhow::anyhow!("returned an invalid column: {e}"))?;
        let column = match ret {
            Scalar::Utf8 => Column::Str(StringArray::from(data)),
            Scalar::Bool => Column::Bool(BooleanArray::from(data)),
            s if s.is_integer() => Column::Int(arrow_array::make_array(data)),
            _ => Column::Other,
        };
        Ok(Results { column })
    }

    /// Row `i`'s value.
    pub fn get(&self, i: usize) -> Out<'_> {
        match &self.column {
            Column::Str(s) if s.is_valid(i) => Out::Str(s.value(i)),
            Column::Bool(b) if b.is_valid(i) => Out::Bool(b.value(i)),
            Column::Int(a) if a.is_valid(i) => int_at(a.as_ref(), i),
            _ => Out::Null,
        }
    }
}

/// The integer at row `i` of an integer column.
fn int_at(a: &dyn Array, i: usize) -> Out<'static> {
    let any = a.as_any();
    macro_rules! int {
        ($($t:ty),*) => {$(
            if let Some(p) = any.downcast_ref::<PrimitiveArray<$t>>() {
                return Out::Int(i128::from(p.value(i)));
            }
        )*};
    }
    int!(Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type);
    Out::Null
}
