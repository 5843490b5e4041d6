/**
 * RFC 2397 `data:` URLs, the only file source stagedroot applies:
 *   data:[<mediatype>][;base64],<data>
 * Both forms Ignition writers emit are read: percent-encoded (`data:,hello%20world`) and
 * base64 (`data:;base64,aGVsbG8=`, also after percent-decoding, as RFC 2397 says).
 * Anything malformed is an error (never a best-effort guess): a config whose contents
 * cannot be read exactly is corrupt.
 */
export class DataUrlError extends Error {}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function decodeDataUrl(url: string): Buffer {
  if (!/^data:/i.test(url)) throw new DataUrlError('not a data: URL');
  const comma = url.indexOf(',');
  if (comma < 0) throw new DataUrlError('no "," between the media type and the data');
  const header = url.slice(5, comma);
  const body = percentDecode(url.slice(comma + 1));
  const params = header === '' ? [] : header.split(';');
  let base64 = false;
  params.forEach((p, i) => {
    if (i > 0 && i === params.length - 1 && p.toLowerCase() === 'base64') {
      base64 = true;
    } else if (i === 0 && p !== '') {
      const [type, sub, ...rest] = p.split('/');
      if (rest.length > 0 || type === undefined || sub === undefined || !TOKEN.test(type) || !TOKEN.test(sub)) {
        throw new DataUrlError(`malformed media type ${JSON.stringify(p)}`);
      }
    } else if (i > 0 || p !== '') {
      const eq = p.indexOf('=');
      if (eq <= 0 || !TOKEN.test(p.slice(0, eq))) throw new DataUrlError(`malformed media type parameter ${JSON.stringify(p)}`);
    }
  });
  if (!base64) return body;
  const text = body.toString('latin1');
  if (text.length % 4 !== 0 || !BASE64.test(text)) throw new DataUrlError('the data is not valid base64');
  return Buffer.from(text, 'base64');
}

/** %XX escapes to bytes; every other character as its UTF-8 bytes. A stray "%" is an error. */
function percentDecode(s: string): Buffer {
  if (!s.includes('%')) return Buffer.from(s, 'utf8');
  const out: Buffer[] = [];
  let last = 0;
  for (let i = s.indexOf('%'); i >= 0; i = s.indexOf('%', i)) {
    const hex = s.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) throw new DataUrlError(`a "%" at offset ${i} is not followed by two hex digits`);
    out.push(Buffer.from(s.slice(last, i), 'utf8'), Buffer.from([parseInt(hex, 16)]));
    i += 3;
    last = i;
  }
  out.push(Buffer.from(s.slice(last), 'utf8'));
  return Buffer.concat(out);
}
