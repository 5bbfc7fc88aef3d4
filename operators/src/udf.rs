//! User-defined functions in Arroyo's plugin format (`arroyo-udf-plugin` 0.2): a UDF's
//! signature, read from its `#[udf]` Rust source as Arroyo reads it (the compiled library
//! carries none), which uses of a UDF a signature fits, and how a record's JSON value becomes
//! an argument.
//!
//! The rules follow Arroyo's parser (`arroyo-udf-common` `parse.rs`): arguments are `bool`,
//! integers, floats, `&str`, `&[u8]` or an `Option` of one; the result is the owned form
//! (`String`, `Vec<u8>`) or a scalar, maybe in an `Option`. hotlist runs scalar, synchronous
//! UDFs only: an `async fn`, a `Vec<_>` argument (an aggregate), `SystemTime`, `Duration` and
//! `f16` are refused with the reason.

use crate::format::Cap;
use std::borrow::Cow;
use std::fmt;

/// A scalar type a UDF takes or gives (Arrow's name in comments).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// `bool` (Boolean).
    Bool,
    /// `i8` (Int8).
    I8,
    /// `i16` (Int16).
    I16,
    /// `i32` (Int32).
    I32,
    /// `i64` (Int64).
    I64,
    /// `u8` (UInt8).
    U8,
    /// `u16` (UInt16).
    U16,
    /// `u32` (UInt32).
    U32,
    /// `u64` (UInt64).
    U64,
    /// `f32` (Float32).
    F32,
    /// `f64` (Float64).
    F64,
    /// `&str` / `String` (Utf8, 32-bit offsets).
    Utf8,
    /// `&[u8]` / `Vec<u8>` (Binary, 32-bit offsets).
    Binary,
}

impl Scalar {
    /// Whether an integer type.
    pub fn is_integer(self) -> bool {
        use Scalar::*;
        matches!(self, I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64)
    }

    /// The Rust type a UDF source writes for it (as an argument).
    pub fn rust_arg(self) -> &'static str {
        use Scalar::*;
        match self {
            Bool => "bool",
            I8 => "i8",
            I16 => "i16",
            I32 => "i32",
            I64 => "i64",
            U8 => "u8",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            F32 => "f32",
            F64 => "f64",
            Utf8 => "&str",
            Binary => "&[u8]",
        }
    }

    /// The smallest and largest value of an integer type.
    fn range(self) -> (i128, i128) {
        use Scalar::*;
        match self {
            I8 => (i8::MIN.into(), i8::MAX.into()),
            I16 => (i16::MIN.into(), i16::MAX.into()),
            I32 => (i32::MIN.into(), i32::MAX.into()),
            I64 => (i64::MIN.into(), i64::MAX.into()),
            U8 => (0, u8::MAX.into()),
            U16 => (0, u16::MAX.into()),
            U32 => (0, u32::MAX.into()),
            U64 => (0, u64::MAX.into()),
            _ => (0, -1),
        }
    }
}

/// A type with its nullability (`Option<_>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Typed {
    /// The scalar.
    pub scalar: Scalar,
    /// Written as `Option<_>`.
    pub nullable: bool,
}

impl fmt::Display for Typed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nullable {
            write!(f, "Option<{}>", self.scalar.rust_arg())
        } else {
            f.write_str(self.scalar.rust_arg())
        }
    }
}

/// A UDF's signature: its name (the function's), arguments and result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    /// The function's name.
    pub name: String,
    /// Its arguments, in order.
    pub args: Vec<Typed>,
    /// Its result.
    pub ret: Typed,
}

/// What a UDF computes for a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Use {
    /// The item id: a string or an integer (written in decimal).
    ItemId,
    /// A dim (by name): a string or an integer.
    Dim(String),
    /// Whether the record is counted: `bool`, or an integer (0 drops it).
    Filter,
}

impl fmt::Display for Use {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Use::ItemId => f.write_str("item_id"),
            Use::Dim(name) => write!(f, "dims.{name}"),
            Use::Filter => f.write_str("filter"),
        }
    }
}

impl Signature {
    /// Reads the signature of the one `#[udf]` function of a UDF's source file.
    pub fn from_source(source: &str) -> Result<Signature, String> {
        let file = syn::parse_file(source).map_err(|e| format!("not Rust source: {e}"))?;
        let udfs: Vec<&syn::ItemFn> = file
            .items
            .iter()
            .filter_map(|item| match item {
                syn::Item::Fn(f) if f.attrs.iter().any(is_udf_attr) => Some(f),
                _ => None,
            })
            .collect();
        let f = match udfs[..] {
            [f] => f,
            [] => return Err("no function is annotated with #[udf]".into()),
            _ => return Err("more than one function is annotated with #[udf]".into()),
        };
        Signature::of_fn(f)
    }

    fn of_fn(f: &syn::ItemFn) -> Result<Signature, String> {
        let name = f.sig.ident.to_string();
        if f.sig.asyncness.is_some() {
            return Err(format!("{name} is an async UDF: hotlist runs synchronous UDFs only"));
        }
        let mut args = Vec::new();
        for (i, arg) in f.sig.inputs.iter().enumerate() {
            let syn::FnArg::Typed(t) = arg else {
                return Err(format!("{name} takes self"));
            };
            let ty = typed(&t.ty, false).map_err(|e| format!("{name} argument {i}: {e}"))?;
            args.push(ty);
        }
        if args.is_empty() {
            return Err(format!("{name} takes no argument: a UDF here takes at least one"));
        }
        let ret = match &f.sig.output {
            syn::ReturnType::Default => return Err(format!("{name} returns nothing")),
            syn::ReturnType::Type(_, t) => typed(t, true).map_err(|e| format!("{name} result: {e}"))?,
        };
        Ok(Signature { name, args, ret })
    }

    /// Whether the signature fits `use_` with `arity` arguments configured: an error saying why
    /// not.
    pub fn check_use(&self, use_: &Use, arity: usize) -> Result<(), String> {
        if arity != self.args.len() {
            return Err(format!(
                "{use_} gives {} {} argument(s), but {} takes {}",
                self.name,
                arity,
                self.name,
                self.args.len()
            ));
        }
        let r = self.ret.scalar;
        let fits = match use_ {
            Use::ItemId | Use::Dim(_) => r == Scalar::Utf8 || r.is_integer(),
            Use::Filter => r == Scalar::Bool || r.is_integer(),
        };
        if fits {
            return Ok(());
        }
        let want = match use_ {
            Use::ItemId | Use::Dim(_) => "String or an integer",
            Use::Filter => "bool or an integer",
        };
        let ret = match r {
            Scalar::Utf8 => "String",
            Scalar::Binary => "Vec<u8>",
            other => other.rust_arg(),
        };
        Err(format!(
            "{use_} needs a UDF returning {want}, but {} returns {ret}",
            self.name
        ))
    }
}

fn is_udf_attr(a: &syn::Attribute) -> bool {
    a.path().segments.last().is_some_and(|s| s.ident == "udf")
}

/// The type of an argument (`owned` false: `&str`, `&[u8]`) or result (`owned`: `String`,
/// `Vec<u8>`), as Arroyo's parser reads it.
fn typed(ty: &syn::Type, owned: bool) -> Result<Typed, String> {
    match ty {
        syn::Type::Path(p) => {
            let last = p.path.segments.last().ok_or("an empty type")?;
            let name = last.ident.to_string();
            let inner = || match &last.arguments {
                syn::PathArguments::AngleBracketed(a) => match a.args.first() {
                    Some(syn::GenericArgument::Type(t)) if a.args.len() == 1 => Ok(t),
                    _ => Err(format!("{name} must have one type argument")),
                },
                _ => Err(format!("{name} must have a type argument")),
            };
            match name.as_str() {
                "Option" => {
                    let t = typed(inner()?, owned)?;
                    Ok(Typed { nullable: true, ..t })
                }
                "Vec" if is_u8(inner()?) => match owned {
                    true => Ok(not_null(Scalar::Binary)),
                    false => Err("expected &[u8] instead of Vec<u8>".into()),
                },
                "Vec" => Err("a Vec<_> argument makes an aggregate UDF, which hotlist does not run".into()),
                "String" => match owned {
                    true => Ok(not_null(Scalar::Utf8)),
                    false => Err("expected &str instead of String".into()),
                },
                "SystemTime" | "Duration" | "f16" => Err(format!("{name} is not supported by hotlist")),
                other => primitive(other)
                    .map(not_null)
                    .ok_or_else(|| format!("unsupported type {other}")),
            }
        }
        syn::Type::Reference(r) => {
            let what = match &*r.elem {
                syn::Type::Path(p) if p.path.is_ident("str") => Scalar::Utf8,
                syn::Type::Slice(s) if is_u8(&s.elem) => Scalar::Binary,
                _ => return Err("unsupported reference type (only &str and &[u8])".into()),
            };
            match (what, owned) {
                (Scalar::Utf8, true) => Err("expected String, not &str".into()),
                (_, true) => Err("expected Vec<u8>, not &[u8]".into()),
                (s, false) => Ok(not_null(s)),
            }
        }
        _ => Err("unsupported type".into()),
    }
}

fn is_u8(t: &syn::Type) -> bool {
    matches!(t, syn::Type::Path(p) if p.path.is_ident("u8"))
}

fn not_null(scalar: Scalar) -> Typed {
    Typed {
        scalar,
        nullable: false,
    }
}

fn primitive(name: &str) -> Option<Scalar> {
    use Scalar::*;
    Some(match name {
        "bool" => Bool,
        "i8" => I8,
        "i16" => I16,
        "i32" => I32,
        "i64" => I64,
        "u8" => U8,
        "u16" => U16,
        "u32" => U32,
        "u64" => U64,
        "f32" => F32,
        "f64" => F64,
        _ => return None,
    })
}

/// One argument's value for one record.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg<'a> {
    /// No value (the pointer found nothing, or `null`): a UDF whose argument is not an
    /// `Option` is not called, and its result is null.
    Null,
    /// A `bool`.
    Bool(bool),
    /// An integer, for any integer type (checked to fit it).
    Int(i128),
    /// A float, for `f32` and `f64`.
    Float(f64),
    /// A string, for `&str` (its bytes for `&[u8]`).
    Str(Cow<'a, str>),
}

/// The argument of type `to` that a record's JSON value `cap` gives, or what was found instead
/// ("a boolean", "an integer out of range for u8", ...). An integer passes as a string in its
/// decimal form (`1000` and `"1000"` are the same id) and as a float; a string never passes
/// as a number.
pub fn arg_of<'a>(cap: &Cap<'a>, to: Scalar) -> Result<Arg<'a>, String> {
    use Scalar::*;
    let int = |v: i128| -> Result<Arg<'a>, String> {
        let (lo, hi) = to.range();
        if (lo..=hi).contains(&v) {
            Ok(Arg::Int(v))
        } else {
            Err(format!("an integer out of range for {}", to.rust_arg()))
        }
    };
    match (cap, to) {
        (Cap::Missing | Cap::Null, _) => Ok(Arg::Null),
        (Cap::Str(s), Utf8 | Binary) => Ok(Arg::Str(s.clone())),
        (Cap::Int(v), Utf8 | Binary) => Ok(Arg::Str(v.to_string().into())),
        (Cap::BigInt(v), Utf8 | Binary) => Ok(Arg::Str(v.to_string().into())),
        (Cap::Int(v), t) if t.is_integer() => int(i128::from(*v)),
        (Cap::BigInt(v), t) if t.is_integer() => int(i128::from(*v)),
        (Cap::Int(v), F32 | F64) => Ok(Arg::Float(*v as f64)),
        (Cap::BigInt(v), F32 | F64) => Ok(Arg::Float(*v as f64)),
        (Cap::Float(v), F32 | F64) => Ok(Arg::Float(*v)),
        (Cap::Bool(b), Bool) => Ok(Arg::Bool(*b)),
        (Cap::Str(_), _) => Err("a string".into()),
        (Cap::Int(_) | Cap::BigInt(_), _) => Err("an integer".into()),
        (Cap::Float(_), _) => Err("a float".into()),
        (Cap::Bool(_), _) => Err("a boolean".into()),
        (Cap::Other(what), _) => Err((*what).into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(src: &str) -> Result<Signature, String> {
        Signature::from_source(src)
    }

    /// The types Arroyo's parser accepts, read as it reads them; what hotlist does not run is
    /// refused with the reason.
    #[test]
    fn signatures_are_read_as_arroyo_reads_them() {
        let s = sig("use arroyo_udf_plugin::udf;\n#[udf]\nfn f(a: &str, b: Option<i64>, c: &[u8], d: f64) -> Option<String> { None }\nfn helper() {}")
            .expect("parses");
        assert_eq!(s.name, "f");
        let t = |scalar, nullable| Typed { scalar, nullable };
        assert_eq!(
            s.args,
            [
                t(Scalar::Utf8, false),
                t(Scalar::I64, true),
                t(Scalar::Binary, false),
                t(Scalar::F64, false)
            ]
        );
        assert_eq!(s.ret, t(Scalar::Utf8, true));
        assert_eq!(
            sig("#[arroyo_udf_plugin::udf] fn g(x: u8) -> Vec<u8> { vec![] }")
                .expect("ok")
                .ret,
            t(Scalar::Binary, false)
        );
        let refused = [
            ("fn f(x: &str) -> String { x.into() }", "no function"),
            (
                "#[udf] fn f(x: &str) -> String { x.into() } #[udf] fn g(x: &str) -> String { x.into() }",
                "more than one",
            ),
            ("#[udf] async fn f(x: &str) -> String { x.into() }", "async"),
            ("#[udf] fn f(x: Vec<i64>) -> i64 { 0 }", "aggregate"),
            ("#[udf] fn f(x: String) -> String { x }", "&str instead of String"),
            ("#[udf] fn f(x: &str) -> &str { x }", "expected String"),
            ("#[udf] fn f(x: &str) { }", "returns nothing"),
            ("#[udf] fn f() -> i64 { 0 }", "takes no argument"),
            ("#[udf] fn f(x: SystemTime) -> i64 { 0 }", "SystemTime is not supported"),
            (
                "#[udf] fn f(x: HashMap<String, i32>) -> i64 { 0 }",
                "unsupported type HashMap",
            ),
            ("not rust at all {", "not Rust source"),
        ];
        for (src, why) in refused {
            let e = sig(src).expect_err(src);
            assert!(e.contains(why), "{src}: {e}");
        }
    }

    /// Ids and dims take strings and integers, filters booleans and integers; the arity must
    /// match.
    #[test]
    fn a_signature_fits_its_use() {
        let of = |ret: &str| sig(&format!("#[udf] fn f(x: &str) -> {ret} {{ todo!() }}")).expect("parses");
        assert!(of("String").check_use(&Use::ItemId, 1).is_ok());
        assert!(of("Option<i64>").check_use(&Use::ItemId, 1).is_ok());
        assert!(of("u32").check_use(&Use::Dim("c".into()), 1).is_ok());
        assert!(of("i64").check_use(&Use::Filter, 1).is_ok());
        assert!(of("bool").check_use(&Use::Filter, 1).is_ok());
        let e = of("f64").check_use(&Use::ItemId, 1).expect_err("a float id");
        assert_eq!(
            e,
            "item_id needs a UDF returning String or an integer, but f returns f64"
        );
        let e = of("String").check_use(&Use::Filter, 1).expect_err("a string filter");
        assert_eq!(
            e,
            "filter needs a UDF returning bool or an integer, but f returns String"
        );
        let e = of("String")
            .check_use(&Use::Dim("country".into()), 2)
            .expect_err("arity");
        assert_eq!(e, "dims.country gives f 2 argument(s), but f takes 1");
    }

    /// A JSON value becomes an argument of a type that can hold it, or says what it is.
    #[test]
    fn json_values_become_arguments_or_say_what_they_are() {
        let str_cap = Cap::Str("x".into());
        let cases: [(Cap<'_>, Scalar, Result<Arg<'_>, String>); 11] = [
            (str_cap.clone(), Scalar::Utf8, Ok(Arg::Str("x".into()))),
            (Cap::Int(-7), Scalar::Utf8, Ok(Arg::Str("-7".into()))),
            (Cap::Int(255), Scalar::U8, Ok(Arg::Int(255))),
            (Cap::Int(256), Scalar::U8, Err("an integer out of range for u8".into())),
            (Cap::BigInt(u64::MAX), Scalar::U64, Ok(Arg::Int(u64::MAX.into()))),
            (Cap::Int(2), Scalar::F32, Ok(Arg::Float(2.0))),
            (Cap::Float(0.5), Scalar::I64, Err("a float".into())),
            (Cap::Bool(true), Scalar::Bool, Ok(Arg::Bool(true))),
            (str_cap, Scalar::I64, Err("a string".into())),
            (Cap::Missing, Scalar::Bool, Ok(Arg::Null)),
            (Cap::Other("an object"), Scalar::Utf8, Err("an object".into())),
        ];
        for (cap, to, want) in cases {
            assert_eq!(arg_of(&cap, to), want, "{cap:?} as {to:?}");
        }
    }
}
