// Form fields built from a kind's params schema (GET /v1/meta): each param whose value is a
// number, a whole number, true or false, or one of a list gets a field of its type, with the
// server's default as its placeholder and its bounds as the field's; the others (lists, nested
// settings) are given as JSON. A field left as it is sends nothing: the server's default holds.
import { h } from '../dom.js';

// The schema of a param's value without its `null` (a param that may be left unset).
function valueSchema(schema) {
  const options = (schema.anyOf ?? [schema]).filter((option) => option.type !== 'null');
  return options.length === 1 ? { ...schema, ...options[0] } : null;
}

function describe(schema) {
  const tasks = schema['x-tasks'] ? ` Tasks: ${schema['x-tasks'].join(', ')}.` : '';
  return `${schema.description ?? ''}${tasks}`.trim();
}

function field(name, schema) {
  const value = valueSchema(schema);
  if (!value) return null;
  const id = `param-${name}`;
  const hint = describe(schema);
  const label = (control) => h('label', { for: id, title: hint || null }, `${name} `, control);
  if (value.enum) {
    const shown = value.default === null || value.default === undefined ? 'default' : `default (${value.default})`;
    const input = h('select', { id, name, 'data-param': 'enum' },
      h('option', { value: '' }, shown), value.enum.map((v) => h('option', { value: String(v) }, String(v))));
    const read = () => value.enum.find((v) => String(v) === input.value);
    return { name, label: label(input), read: () => (input.value === '' ? undefined : read()) };
  }
  if (value.type === 'boolean') {
    const initial = Boolean(value.default);
    const input = h('input', { type: 'checkbox', id, name, 'data-param': 'boolean', checked: initial });
    return { name, label: label(input), read: () => (input.checked === initial ? undefined : input.checked) };
  }
  if (value.type === 'integer' || value.type === 'number') {
    const input = h('input', {
      type: 'number',
      id,
      name,
      'data-param': value.type,
      min: value.minimum ?? value.exclusiveMinimum,
      max: value.maximum ?? value.exclusiveMaximum,
      step: value.type === 'integer' ? 1 : 'any',
      placeholder: value.default ?? '',
    });
    return { name, label: label(input), read: () => (input.value === '' ? undefined : Number(input.value)) };
  }
  return null;
}

// The fields of `schema`'s params, and `read()`: the values given, by param name.
export function paramFields(schema) {
  const fields = Object.entries(schema.properties ?? {})
    .map(([name, property]) => field(name, property))
    .filter(Boolean);
  const read = () => Object.fromEntries(fields
    .map((f) => [f.name, f.read()])
    .filter(([, value]) => value !== undefined));
  return { labels: fields.map((f) => f.label), read };
}
