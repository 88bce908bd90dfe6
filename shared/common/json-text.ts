// JSON text written by PostgreSQL (json_build_object), passed to the response as it is: no parse,
// no objects, no re-serialization in Node. A body holding some is composed as text (jsonBody).

export class JsonText {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }

  /** Anything else that serializes it still gets the same JSON. */
  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

/** A JSON object whose JsonText values are inserted as they are; `undefined` values are left out, as JSON.stringify does. */
export function jsonBody(body: Record<string, unknown>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(body)) {
    if (value === undefined) continue;
    parts.push(`${JSON.stringify(key)}:${value instanceof JsonText ? value.text : JSON.stringify(value)}`);
  }
  return `{${parts.join(',')}}`;
}
