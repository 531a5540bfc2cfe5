//! The syntax tree of the PromQL subset local evaluation understands, with the static types the
//! parser checks (Prometheus rejects `rate(x)` or `x[5m] + 1` before evaluating anything, and so
//! do we, with the same kind of message).

use std::fmt;

use regex::Regex;

/// Static type of an expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    Scalar,
    Vector,
    Matrix,
    String,
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ValueType::Scalar => "scalar",
            ValueType::Vector => "instant vector",
            ValueType::Matrix => "range vector",
            ValueType::String => "string",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    Eq,
    Ne,
    Re,
    Nre,
}

/// One label matcher; regexes are compiled once, fully anchored like RE2 in Prometheus.
#[derive(Debug, Clone)]
pub struct LabelMatcher {
    pub name: String,
    pub kind: MatchKind,
    pub value: String,
    pub re: Option<Regex>,
}

impl LabelMatcher {
    /// Does a label value (empty when the label is absent) satisfy the matcher?
    pub fn matches(&self, v: &str) -> bool {
        match self.kind {
            MatchKind::Eq => v == self.value,
            MatchKind::Ne => v != self.value,
            MatchKind::Re => self.re.as_ref().is_some_and(|r| r.is_match(v)),
            MatchKind::Nre => !self.re.as_ref().is_some_and(|r| r.is_match(v)),
        }
    }
}

/// `name{matchers} offset d`. The metric name, when written, is an `__name__` equality matcher.
#[derive(Debug, Clone)]
pub struct VectorSelector {
    pub matchers: Vec<LabelMatcher>,
    pub offset_ms: i64,
}

impl VectorSelector {
    /// The metric name when the selector pins it with `=`: lets the store skip other names.
    pub fn exact_name(&self) -> Option<&str> {
        self.matchers.iter().find(|m| m.name == "__name__" && m.kind == MatchKind::Eq).map(|m| m.value.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggOp {
    Sum,
    Avg,
    Min,
    Max,
    Count,
    Group,
    Stddev,
    Stdvar,
    Topk,
    Bottomk,
    Quantile,
    CountValues,
}

impl AggOp {
    pub fn from_name(s: &str) -> Option<AggOp> {
        Some(match s {
            "sum" => AggOp::Sum,
            "avg" => AggOp::Avg,
            "min" => AggOp::Min,
            "max" => AggOp::Max,
            "count" => AggOp::Count,
            "group" => AggOp::Group,
            "stddev" => AggOp::Stddev,
            "stdvar" => AggOp::Stdvar,
            "topk" => AggOp::Topk,
            "bottomk" => AggOp::Bottomk,
            "quantile" => AggOp::Quantile,
            "count_values" => AggOp::CountValues,
            _ => return None,
        })
    }

    /// The type of the parameter before the vector, for the aggregations that take one.
    pub fn param_type(self) -> Option<ValueType> {
        match self {
            AggOp::Topk | AggOp::Bottomk | AggOp::Quantile => Some(ValueType::Scalar),
            AggOp::CountValues => Some(ValueType::String),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grouping {
    /// No clause: everything in one group.
    None,
    By(Vec<String>),
    Without(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Atan2,
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    And,
    Or,
    Unless,
}

impl BinOp {
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And | BinOp::Unless => 2,
            BinOp::Eq | BinOp::Ne | BinOp::Gt | BinOp::Lt | BinOp::Ge | BinOp::Le => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::Atan2 => 5,
            BinOp::Pow => 6,
        }
    }

    pub fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Gt | BinOp::Lt | BinOp::Ge | BinOp::Le)
    }

    pub fn is_set(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or | BinOp::Unless)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "^",
            BinOp::Atan2 => "atan2",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Gt => ">",
            BinOp::Lt => "<",
            BinOp::Ge => ">=",
            BinOp::Le => "<=",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Unless => "unless",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cardinality {
    OneToOne,
    ManyToOne,
    OneToMany,
    ManyToMany,
}

/// How two instant vectors are matched: `on`/`ignoring` and `group_left`/`group_right`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorMatching {
    pub card: Cardinality,
    /// `on (...)` when true, `ignoring (...)` (or nothing) when false.
    pub on: bool,
    pub labels: Vec<String>,
    /// Labels copied from the "one" side with `group_left (...)` / `group_right (...)`.
    pub include: Vec<String>,
}

#[derive(Debug, Clone)]
pub enum Expr {
    Number(f64),
    Str(String),
    Selector(VectorSelector),
    Matrix { selector: VectorSelector, range_ms: i64 },
    Subquery { expr: Box<Expr>, range_ms: i64, step_ms: Option<i64>, offset_ms: i64 },
    Call { func: String, args: Vec<Expr> },
    Aggregate { op: AggOp, param: Option<Box<Expr>>, expr: Box<Expr>, grouping: Grouping },
    Binary { op: BinOp, lhs: Box<Expr>, rhs: Box<Expr>, return_bool: bool, matching: Option<VectorMatching> },
    Negate(Box<Expr>),
    Paren(Box<Expr>),
}

/// A function's signature: argument types (the last one repeats when `variadic`), and result.
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    pub args: &'static [ValueType],
    /// How many trailing arguments may be left out (-1: the last may repeat without bound).
    pub variadic: i8,
    pub returns: ValueType,
}

/// Functions local evaluation implements.
pub fn signature(name: &str) -> Option<Signature> {
    use ValueType::*;
    const M: &[ValueType] = &[Matrix];
    const V: &[ValueType] = &[Vector];
    let s = |args: &'static [ValueType], variadic: i8, returns| Some(Signature { args, variadic, returns });
    match name {
        "rate" | "increase" | "irate" | "delta" | "idelta" | "deriv" | "resets" | "changes" | "avg_over_time"
        | "min_over_time" | "max_over_time" | "sum_over_time" | "count_over_time" | "last_over_time"
        | "stddev_over_time" | "stdvar_over_time" | "present_over_time" | "absent_over_time" => s(M, 0, Vector),
        "quantile_over_time" => s(&[Scalar, Matrix], 0, Vector),
        "predict_linear" => s(&[Matrix, Scalar], 0, Vector),
        "histogram_quantile" => s(&[Scalar, Vector], 0, Vector),
        "clamp" => s(&[Vector, Scalar, Scalar], 0, Vector),
        "clamp_min" | "clamp_max" => s(&[Vector, Scalar], 0, Vector),
        "abs" | "ceil" | "floor" | "exp" | "ln" | "log2" | "log10" | "sqrt" | "sgn" | "absent" | "sort"
        | "sort_desc" => s(V, 0, Vector),
        "round" => s(&[Vector, Scalar], 1, Vector),
        "time" => s(&[], 0, Scalar),
        "vector" => s(&[Scalar], 0, Vector),
        "scalar" => s(V, 0, Scalar),
        "label_replace" => s(&[Vector, String, String, String, String], 0, Vector),
        "label_join" => s(&[Vector, String, String, String], -1, Vector),
        _ => None,
    }
}

/// Functions Prometheus 2.42 has that local evaluation does not (a clear "not supported" beats
/// "unknown function" for a query that works on the server).
pub const KNOWN_BUT_UNSUPPORTED: &[&str] = &[
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "cos",
    "cosh",
    "sin",
    "sinh",
    "tan",
    "tanh",
    "deg",
    "rad",
    "pi",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "hour",
    "minute",
    "month",
    "year",
    "timestamp",
    "holt_winters",
    "histogram_count",
    "histogram_sum",
    "histogram_fraction",
];

impl Expr {
    /// The static type, for checks and for choosing the JSON result type.
    pub fn value_type(&self) -> ValueType {
        match self {
            Expr::Number(_) => ValueType::Scalar,
            Expr::Str(_) => ValueType::String,
            Expr::Selector(_) => ValueType::Vector,
            Expr::Matrix { .. } | Expr::Subquery { .. } => ValueType::Matrix,
            Expr::Call { func, .. } => signature(func).map_or(ValueType::Vector, |s| s.returns),
            Expr::Aggregate { .. } => ValueType::Vector,
            Expr::Binary { lhs, rhs, .. } => {
                if lhs.value_type() == ValueType::Scalar && rhs.value_type() == ValueType::Scalar {
                    ValueType::Scalar
                } else {
                    ValueType::Vector
                }
            }
            Expr::Negate(e) | Expr::Paren(e) => e.value_type(),
        }
    }
}
