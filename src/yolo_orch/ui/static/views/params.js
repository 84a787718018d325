// Form fields built from a kind's params schema (GET /v1/meta): each param whose value is a
// number, a whole number, true or false, or one of a list gets a field of its type, with the
// server's default as its placeholder and its bounds as the field's; the others (lists, nested
// settings) get `nestedFields`: a folding box of their own fields for a nested object, a list of
// choices, lines of text, or JSON. A field left as it is sends nothing: the server's default
// holds. `schemaFields` builds the same for any object schema (a kind's request body).
import { h } from '../dom.js';

// The schema `schema` stands for, its `$ref`s followed within `root` (a JSON schema with its
// `$defs`, or the OpenAPI document with its components).
export function resolve(schema, root) {
  let current = schema;
  for (let hops = 0; current?.$ref && hops < 16; hops += 1) {
    const target = current.$ref.replace(/^#\//, '').split('/').reduce((node, key) => node?.[key], root);
    const { $ref: _ref, ...rest } = current;
    current = { ...(target ?? {}), ...rest };
  }
  return current ?? {};
}

// The schema of a param's value without its `null` (a param that may be left unset).
function valueSchema(schema, root) {
  const options = (schema.anyOf ?? [schema]).map((option) => resolve(option, root)).filter((option) => option.type !== 'null');
  if (options.length !== 1) return null;
  const { anyOf: _anyOf, ...rest } = schema;
  return { ...options[0], ...rest };
}

function describe(schema) {
  const tasks = schema['x-tasks'] ? ` Tasks: ${schema['x-tasks'].join(', ')}.` : '';
  return `${schema.description ?? ''}${tasks}`.trim();
}

function shownDefault(value) {
  if (value === null || value === undefined) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

// A field of one value, or null for a param that is not one.
function field(name, schema, root = schema, { prefix = 'param', key = name, required = false } = {}) {
  const value = valueSchema(schema, root);
  if (!value) return null;
  const id = `${prefix}-${name}`;
  const hint = describe(schema);
  const label = (control) => h('label', { for: id, title: hint || null }, `${key} `, control);
  if (value.enum) {
    const unset = value.default === null || value.default === undefined;
    const shown = unset ? (required ? 'choose' : 'default') : `default (${value.default})`;
    const input = h('select', { id, name: key, 'data-param': 'enum', required: required || null },
      h('option', { value: '' }, shown), value.enum.map((v) => h('option', { value: String(v) }, String(v))));
    const read = () => value.enum.find((v) => String(v) === input.value);
    return { name: key, input, label: label(input), read: () => (input.value === '' ? undefined : read()) };
  }
  if (value.type === 'boolean' && (value.default === null || value.default === undefined) && schema.anyOf) {
    // true, false, or the server's choice
    const input = h('select', { id, name: key, 'data-param': 'boolean' },
      h('option', { value: '' }, 'default'), h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
    return { name: key, input, label: label(input), read: () => (input.value === '' ? undefined : input.value === 'true') };
  }
  if (value.type === 'boolean') {
    const initial = Boolean(value.default);
    const input = h('input', { type: 'checkbox', id, name: key, 'data-param': 'boolean', checked: initial });
    return { name: key, input, label: label(input), read: () => (input.checked === initial ? undefined : input.checked) };
  }
  if (value.type === 'integer' || value.type === 'number') {
    const input = h('input', {
      type: 'number',
      id,
      name: key,
      'data-param': value.type,
      min: value.minimum ?? value.exclusiveMinimum,
      max: value.maximum ?? value.exclusiveMaximum,
      step: value.multipleOf ?? (value.type === 'integer' ? 1 : 'any'),
      placeholder: value.default ?? '',
      required: required || null,
    });
    return { name: key, input, label: label(input), read: () => (input.value === '' ? undefined : Number(input.value)) };
  }
  return null;
}

// A text field (a string param): its pattern and lengths are the input's.
function textField(name, value, schema, { prefix, key, required }) {
  const id = `${prefix}-${name}`;
  const input = h('input', {
    type: 'text',
    id,
    name: key,
    'data-param': 'string',
    pattern: value.pattern ?? null,
    minlength: value.minLength ?? null,
    maxlength: value.maxLength ?? null,
    placeholder: shownDefault(value.default),
    required: required || null,
    spellcheck: 'false',
  });
  const label = h('label', { for: id, title: describe(schema) || null }, `${key} `, input);
  return { name: key, input, label, read: () => (input.value === '' ? undefined : input.value) };
}

// Any other value: a list of choices, lines of text, a folding box of its own fields, or JSON.
function otherField(name, schema, root, { prefix, key = name, required = false }) {
  const id = `${prefix}-${name}`;
  const hint = describe(schema);
  const value = valueSchema(schema, root);
  const items = value?.type === 'array' ? resolve(value.items ?? {}, root) : null;
  if (value?.type === 'string' && !value.const) return textField(name, value, schema, { prefix, key, required });
  if (items?.enum) {
    const input = h('select', { id, name: key, multiple: true, 'data-nested': 'choices', size: Math.min(items.enum.length, 6) },
      items.enum.map((v) => h('option', { value: String(v) }, String(v))));
    const read = () => {
      const chosen = [...input.selectedOptions].map((o) => items.enum.find((v) => String(v) === o.value));
      return chosen.length ? chosen : undefined;
    };
    return { name: key, input, label: h('label', { for: id, title: hint || null }, `${key} `, input), read };
  }
  if (items?.type === 'string') {
    const input = h('textarea', { id, name: key, rows: 2, 'data-nested': 'lines', required: required || null,
      placeholder: 'one a line', spellcheck: 'false' });
    const read = () => {
      const lines = input.value.split('\n').map((line) => line.trim()).filter(Boolean);
      return lines.length ? lines : undefined;
    };
    return { name: key, input, label: h('label', { for: id, title: hint || null }, `${key} `, input), read };
  }
  if (value?.type === 'object' && value.properties && !value.additionalProperties) {
    // Its fields are not required here: it is sent only when one is given, and the server
    // says what else it needs.
    const inner = schemaFields(value, root, { prefix: id });
    const box = h('details', { class: 'nested', id, 'data-nested': 'object', title: hint || null },
      h('summary', {}, key), h('div', { class: 'param-grid' }, inner.labels));
    const read = () => {
      const given = inner.read();
      return Object.keys(given).length ? given : undefined;
    };
    return { name: key, input: box, label: box, read, fields: inner.fields };
  }
  if (value?.const !== undefined) return null; // one value only: nothing to choose
  const example = schema.examples?.[0] ?? value?.examples?.[0];
  const input = h('textarea', {
    id,
    name: key,
    rows: 2,
    'data-nested': 'json',
    required: required || null,
    placeholder: example !== undefined ? JSON.stringify(example) : (shownDefault(value?.default ?? schema.default) || 'JSON'),
    spellcheck: 'false',
  });
  const read = () => {
    if (!input.value.trim()) return undefined;
    try {
      return JSON.parse(input.value);
    } catch {
      throw Object.assign(new Error(`${key} is not JSON`), { field: input });
    }
  };
  return { name: key, input, label: h('label', { for: id, title: hint || null }, `${key} (JSON) `, input), read };
}

function reader(fields) {
  return () => Object.fromEntries(fields
    .map((f) => [f.name, f.read()])
    .filter(([, value]) => value !== undefined));
}

// The fields of `schema`'s params, and `read()`: the values given, by param name.
export function paramFields(schema) {
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {})
    .map(([name, property]) => field(name, property, schema, { required: required.has(name) }))
    .filter(Boolean);
  return { labels: fields.map((f) => f.label), read: reader(fields), fields };
}

// The params `paramFields` leaves out (lists, nested settings), each as a field of its own.
export function nestedFields(schema) {
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {})
    .filter(([name, property]) => !field(name, property, schema))
    .map(([name, property]) => otherField(name, property, schema, { prefix: 'param', required: required.has(name) }))
    .filter(Boolean);
  return { labels: fields.map((f) => f.label), read: reader(fields), fields };
}

// Every property of an object schema (`only`: those named), one value or not.
export function schemaFields(schema, root, { prefix = 'param', only = null, required = [] } = {}) {
  const needed = new Set(required);
  const fields = Object.entries(schema.properties ?? {})
    .filter(([name]) => !only || only.includes(name))
    .map(([name, property]) => field(name, property, root, { prefix, required: needed.has(name) })
      ?? otherField(name, property, root, { prefix, required: needed.has(name) }))
    .filter(Boolean);
  return { labels: fields.map((f) => f.label), read: reader(fields), fields };
}
