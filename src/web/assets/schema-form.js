// A form generated from a capability's JSON Schema: string, number, integer, boolean and enum
// fields get their own controls; anything else (nested objects, arrays, no schema) is edited as
// JSON in a textarea.
import { el, pretty } from "./common.js";

let serial = 0;

const propertiesOf = (schema) =>
  (schema && typeof schema === "object" && schema.properties && typeof schema.properties === "object" && !Array.isArray(schema.properties))
    ? schema.properties : null;

const typeOf = (spec) => {
  if (!spec || typeof spec !== "object") return "json";
  if (Array.isArray(spec.enum) && spec.enum.length && spec.enum.every((v) => typeof v === "string" || typeof v === "number")) return "enum";
  const type = Array.isArray(spec.type) ? spec.type.find((t) => t !== "null") : spec.type;
  return ["string", "number", "integer", "boolean"].includes(type) ? type : "json";
};

/** An example input for snippets: defaults, first enum values, else placeholders. */
export function exampleInput(schema) {
  const properties = propertiesOf(schema);
  if (!properties) return {};
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const out = {};
  for (const [name, spec] of Object.entries(properties)) {
    if (spec && spec.default !== undefined) out[name] = spec.default;
    else if (!required.has(name) && Object.keys(properties).length > 1) continue;
    else if (spec && Array.isArray(spec.examples) && spec.examples.length) out[name] = spec.examples[0];
    else {
      const type = typeOf(spec);
      out[name] = type === "enum" ? spec.enum[0]
        : type === "number" || type === "integer" ? 0
          : type === "boolean" ? false
            : type === "json" ? {} : `<${name}>`;
    }
  }
  return out;
}

/**
 * Fill `fieldset` with controls for `schema`. Returns `read()`, which gives the input object or
 * throws an Error listing what is wrong (each bad control is marked aria-invalid with a message).
 * With `raw` (or no usable schema) the whole input is one JSON textarea.
 */
export function buildForm(fieldset, schema, { raw = false, initial = {} } = {}) {
  const legend = fieldset.querySelector("legend");
  fieldset.replaceChildren(legend);
  const properties = propertiesOf(schema);
  const id = `in-${++serial}`;

  if (raw || !properties) {
    const textarea = el("textarea", { id, rows: 8, class: "mono", spellcheck: "false", "aria-describedby": `${id}-hint` });
    textarea.value = pretty(Object.keys(initial).length ? initial : exampleInput(schema));
    const error = el("p", { class: "error", id: `${id}-error`, hidden: true });
    fieldset.append(el("div", { class: "field" },
      el("label", { for: id }, "Input (JSON object)"),
      textarea,
      el("p", { class: "hint", id: `${id}-hint` }, properties ? "Edit the whole input as JSON." : "This capability gives no input schema: write its input as a JSON object."),
      error));
    return () => {
      let value;
      try { value = JSON.parse(textarea.value || "{}"); } catch (err) { value = err; }
      const ok = value && typeof value === "object" && !Array.isArray(value) && !(value instanceof Error);
      textarea.setAttribute("aria-invalid", String(!ok));
      error.hidden = ok;
      error.textContent = ok ? "" : "Write a JSON object, like {\"symbol\": \"BTC\"}.";
      if (!ok) {
        textarea.focus();
        throw new Error("The input is not a JSON object.");
      }
      return value;
    };
  }

  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const readers = [];
  // Required fields first, in the schema's order; JSON objects may arrive with sorted keys.
  const ordered = Object.entries(properties).sort(([a], [b]) => Number(required.has(b)) - Number(required.has(a)));
  for (const [name, spec] of ordered) {
    const fieldId = `${id}-${name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
    const type = typeOf(spec);
    const isRequired = required.has(name);
    const start = initial[name] !== undefined ? initial[name] : spec && spec.default;
    const hintId = `${fieldId}-hint`;
    const described = spec && spec.description ? hintId : undefined;
    let control;
    if (type === "enum") {
      control = el("select", { id: fieldId, name, "aria-describedby": described },
        isRequired ? null : el("option", { value: "" }, "—"),
        spec.enum.map((v) => el("option", { value: String(v) }, String(v))));
      if (start !== undefined) control.value = String(start);
    } else if (type === "boolean") {
      control = el("input", { id: fieldId, name, type: "checkbox", "aria-describedby": described });
      control.checked = start === true;
    } else if (type === "number" || type === "integer") {
      control = el("input", { id: fieldId, name, type: "number", step: type === "integer" ? "1" : "any",
        min: spec.minimum, max: spec.maximum, "aria-describedby": described });
      if (start !== undefined) control.value = String(start);
    } else if (type === "string") {
      control = el("input", { id: fieldId, name, type: "text", maxlength: spec.maxLength, "aria-describedby": described,
        placeholder: Array.isArray(spec.examples) && spec.examples.length ? String(spec.examples[0]) : undefined });
      if (start !== undefined) control.value = String(start);
    } else {
      control = el("textarea", { id: fieldId, name, rows: 4, class: "mono", spellcheck: "false", "aria-describedby": described });
      if (start !== undefined) control.value = pretty(start);
    }
    if (isRequired && type !== "boolean") {
      control.required = true;
      control.setAttribute("aria-required", "true");
    }
    const error = el("p", { class: "error", id: `${fieldId}-error`, hidden: true });
    const label = el("label", { for: fieldId }, name, isRequired ? el("span", { class: "req", "aria-hidden": "true" }, " *") : null,
      type === "json" ? el("span", { class: "muted" }, " (JSON)") : null);
    const hint = described ? el("p", { class: "hint", id: hintId }, spec.description) : null;
    fieldset.append(type === "boolean"
      ? el("div", { class: "field" }, el("label", { class: "check", for: fieldId }, control, " ", name), hint, error)
      : el("div", { class: "field" }, label, control, hint, error));

    readers.push(() => {
      const fail = (message) => {
        control.setAttribute("aria-invalid", "true");
        error.textContent = message;
        error.hidden = false;
        return { name, message };
      };
      control.removeAttribute("aria-invalid");
      error.hidden = true;
      if (type === "boolean") return { name, value: control.checked };
      const text = control.value.trim();
      if (!text) return isRequired ? fail(`${name} is required`) : { name };
      if (type === "number" || type === "integer") {
        const number = Number(text);
        if (!Number.isFinite(number) || (type === "integer" && !Number.isInteger(number))) return fail(`${name} must be ${type === "integer" ? "a whole number" : "a number"}`);
        return { name, value: number };
      }
      if (type === "enum") {
        const match = spec.enum.find((v) => String(v) === control.value);
        return { name, value: match };
      }
      if (type === "json") {
        try { return { name, value: JSON.parse(text) }; } catch { return fail(`${name} must be valid JSON`); }
      }
      return { name, value: control.value };
    });
  }

  return () => {
    const results = readers.map((read) => read());
    const problems = results.filter((r) => r.message);
    if (problems.length) {
      document.getElementById(`${id}-${problems[0].name.replace(/[^A-Za-z0-9_-]/g, "_")}`)?.focus();
      throw new Error(problems.map((p) => p.message).join("; "));
    }
    return Object.fromEntries(results.filter((r) => r.value !== undefined).map((r) => [r.name, r.value]));
  };
}
