// The API client: every page reads and writes through these functions.
// The token lives in sessionStorage (this tab only) and goes in the
// Authorization header, never in a URL; writes send JSON bodies, which the
// API requires of a browser (no form can send them cross-site).

const TOKEN_KEY = 'couponlink.token';

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// ApiError is the API's one error shape: {"error": {code, field, message}}.
export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `the API answered HTTP ${status}`);
    this.status = status;
    this.code = e.code || 'http_' + status;
    this.field = e.field || '';
  }
}

export async function api(method, path, body) {
  // X-Couponlink-Client: the audit then says a change came from the
  // console, not from a script
  const headers = { Accept: 'application/json', 'X-Couponlink-Client': 'console' };
  const token = getToken();
  if (token) headers.Authorization = 'Bearer ' + token;
  const init = { method, headers, credentials: 'omit', cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    // ask for the token only when this one was refused: an answer to a
    // request sent before the token was typed must not ask again
    if (res.status === 401 && getToken() === token) window.dispatchEvent(new CustomEvent('couponlink:need-token'));
    throw new ApiError(res.status, data);
  }
  return data;
}

export const get = (path) => api('GET', path);

// query builds "?a=1&b=2" from the non-empty values of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

// requestID is a random UUID (version 4) for a write's request_id.
// crypto.randomUUID exists only on https pages and localhost;
// crypto.getRandomValues exists on plain http too.
export function requestID() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const x = [...b].map((v) => v.toString(16).padStart(2, '0')).join('');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
