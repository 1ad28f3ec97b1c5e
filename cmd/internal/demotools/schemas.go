package demotools

// The tools' JSON Schemas, served byte for byte as written here (go-sdk
// passes a json.RawMessage schema through unchanged and validates arguments
// against it). They use only the form-generation subset of §4.1 of the
// Builder Tool Contract, the widget schemas of §4.2 exactly, and carry
// examples on every required property without a default.

// builderMetaKey is the _meta key that makes a tool a Builder button (§3).
const builderMetaKey = "io.github.megane-labs/builder"

// maxAtoms is the largest result Builder accepts (§5.1).
const maxAtoms = 500000

const gasBoxInputSchema = `{
  "type": "object",
  "properties": {
    "element": {
      "type": "integer", "minimum": 1, "maximum": 118,
      "x-megane-widget": "element",
      "title": "Element",
      "description": "Atomic number of the gas atoms.",
      "examples": [18]
    },
    "count": {
      "type": "integer", "minimum": 1, "maximum": 500000,
      "x-megane-unit": "count",
      "title": "Atoms",
      "description": "Number of atoms to place.",
      "examples": [100]
    },
    "density": {
      "type": "number", "exclusiveMinimum": 0, "maximum": 25, "default": 0.1,
      "x-megane-unit": "g/cm3",
      "title": "Density",
      "description": "Mass density that sizes the cubic box. Ignored when a box length is given."
    },
    "box": {
      "type": "number", "exclusiveMinimum": 0, "maximum": 10000,
      "x-megane-unit": "angstrom",
      "title": "Box length",
      "description": "Edge of the cubic box. Optional: when given it sets the box and the density is ignored."
    },
    "minDistance": {
      "type": "number", "minimum": 0, "maximum": 10, "default": 0,
      "x-megane-unit": "angstrom",
      "title": "Minimum distance",
      "description": "Smallest allowed distance between two atoms, across periodic boundaries. 0 places atoms independently."
    },
    "seed": {
      "type": "integer", "minimum": 0,
      "x-megane-widget": "seed",
      "title": "Seed",
      "description": "Random seed; the same seed gives the same box."
    },
    "delayMs": {
      "type": "integer", "minimum": 0, "maximum": 600000, "default": 0,
      "title": "Extra run time (ms)",
      "description": "Testing aid: wait this many milliseconds in total, spread over the progress steps, so that progress and cancellation can be observed. 0 runs at full speed."
    }
  },
  "required": ["element", "count", "seed"],
  "additionalProperties": false
}`

const crystalInputSchema = `{
  "type": "object",
  "properties": {
    "element": {
      "type": "integer", "minimum": 1, "maximum": 118,
      "x-megane-widget": "element",
      "title": "Element",
      "description": "Atomic number of the atoms on the lattice sites.",
      "examples": [29]
    },
    "lattice": {
      "type": "string", "enum": ["sc", "bcc", "fcc"], "default": "fcc",
      "title": "Lattice",
      "description": "Cubic Bravais lattice: simple (sc), body-centred (bcc) or face-centred (fcc) cubic."
    },
    "a": {
      "type": "number", "exclusiveMinimum": 0, "maximum": 100,
      "x-megane-unit": "angstrom",
      "title": "Lattice constant",
      "description": "Edge of the conventional cubic cell.",
      "examples": [3.615]
    },
    "repeats": {
      "type": "array",
      "items": {"type": "integer", "minimum": 1, "maximum": 100},
      "minItems": 3, "maxItems": 3, "default": [3, 3, 3],
      "title": "Repeats",
      "description": "Number of conventional cells along a, b and c. The supercell may hold at most 500000 atoms."
    }
  },
  "required": ["element", "a"],
  "additionalProperties": false
}`

// builderResultSchema is the outputSchema of both tools: BuilderResult (§5)
// with the Structure of §5.1 inlined. It is stricter than the contract where
// the contract states a rule in prose (atomic numbers 1..118, a 9-number cell,
// bonds as pairs of non-negative indices).
const builderResultSchema = `{
  "title": "BuilderResult",
  "description": "A structure built by a megane Builder tool, with warnings and provenance.",
  "type": "object",
  "properties": {
    "contract": {"type": "integer", "const": 1},
    "name": {"type": "string", "minLength": 1, "maxLength": 128},
    "structure": {"$ref": "#/$defs/Structure"},
    "warnings": {"type": "array", "items": {"type": "string"}},
    "provenance": {"type": "object"}
  },
  "required": ["contract", "name", "structure", "warnings", "provenance"],
  "additionalProperties": false,
  "$defs": {
    "Structure": {
      "title": "Structure",
      "description": "Atoms as parallel arrays: atomic numbers, Cartesian positions in \u00c5 (flat x,y,z), row-major 3x3 cell in \u00c5 or null, and complete bonds as atom index pairs.",
      "type": "object",
      "properties": {
        "elements": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 118}},
        "positions": {"type": "array", "items": {"type": "number"}},
        "cell": {
          "anyOf": [
            {"type": "array", "items": {"type": "number"}, "minItems": 9, "maxItems": 9},
            {"type": "null"}
          ]
        },
        "bonds": {
          "type": "array",
          "items": {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 2, "maxItems": 2}
        }
      },
      "required": ["elements", "positions", "cell", "bonds"]
    }
  }
}`
