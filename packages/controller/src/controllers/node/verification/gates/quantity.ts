/**
 * Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity), read exactly: a number
 * with an optional binary (Ki..Ei), decimal (n, u, m, k, M..E) or exponent (e3, E-2) suffix, held as
 * a fraction of big integers so that "1.5Gi", "1536Mi" and "1610612736" compare equal and "100m" is
 * below "1". client-node's quantityToScalar mixes numbers and bigints and throws on "1.5Gi".
 */
export interface Quantity {
  /** The value is num / den, den > 0. */
  num: bigint;
  den: bigint;
}

const FORM = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([numkMGTPE])|[eE]([+-]?\d+))?$/;

const BINARY: Readonly<Record<string, bigint>> = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n, Pi: 1n << 50n, Ei: 1n << 60n };
const DECIMAL_EXPONENT: Readonly<Record<string, number>> = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** The quantity `text` stands for, or undefined when it is not one. Exponents beyond ±100 are refused (no real quantity has them). */
export function parseQuantity(text: string): Quantity | undefined {
  const m = FORM.exec(text.trim());
  if (!m) return undefined;
  const [, sign, digits = '', binary, decimal, exponent] = m;
  const [whole = '', fraction = ''] = digits.split('.');
  let num = BigInt(`${whole || '0'}${fraction}`);
  let den = 10n ** BigInt(fraction.length);
  let power = 0;
  if (binary) num *= BINARY[binary] as bigint;
  if (decimal) power = DECIMAL_EXPONENT[decimal] as number;
  if (exponent !== undefined) {
    power = Number(exponent);
    if (Math.abs(power) > 100) return undefined;
  }
  if (power > 0) num *= 10n ** BigInt(power);
  if (power < 0) den *= 10n ** BigInt(-power);
  return { num: sign === '-' ? -num : num, den };
}

/** Negative, zero or positive as a is below, equal to or above b. */
export function compareQuantities(a: Quantity, b: Quantity): number {
  const left = a.num * b.den;
  const right = b.num * a.den;
  return left < right ? -1 : left > right ? 1 : 0;
}
