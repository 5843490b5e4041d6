/** A JSON object (not null, not an array): what a parsed document's maps are. */
export const isRecord = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
