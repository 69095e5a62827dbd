/**
 * Identities from face descriptors, enrolled online: leader clustering, as `npm run bench -- weg`
 * enrols the faces of the shared footage offline. A face joins the identity whose centre (the
 * mean of its faces' unit descriptors) is nearest by cosine similarity, where that similarity is
 * at least `sameIdentity`; otherwise it starts a new identity. Ids are never reused: `<prefix>7`
 * is one person for as long as the gallery lives (identities are not persisted). At most
 * `maxIdentities` are kept; a new one lets the one seen longest ago go.
 */
export interface IdentityGalleryOptions {
  /** Cosine similarity from which a face is an identity's. */
  sameIdentity: number;
  maxIdentities: number;
  /** Ids are this and a number. @defaultValue 'person-' */
  prefix?: string;
}

export interface Identified {
  id: string;
  /**
   * Cosine similarity to the identity's centre before this face joined it; `sameIdentity` for a
   * face that starts one (no match is surer than the threshold it missed).
   */
  similarity: number;
}

export interface IdentityGallery {
  /** The identity of a face, by its descriptor (any length; scaled to unit length here); none for a descriptor of zeros or not-numbers. */
  identify(descriptor: Float32Array): Identified | undefined;
  readonly size: number;
}

interface Identity {
  /** Sum of its faces' unit descriptors: its centre's direction. */
  sum: Float32Array;
  norm: number;
}

export function createIdentityGallery(options: IdentityGalleryOptions): IdentityGallery {
  /** The identities kept, the one seen longest ago first. */
  const identities = new Map<string, Identity>();
  let enrolled = 0;
  return {
    get size() {
      return identities.size;
    },
    identify(descriptor) {
      const norm = Math.sqrt(dot(descriptor, descriptor));
      if (!Number.isFinite(norm) || norm === 0) return undefined;
      const face = unit(descriptor);
      let [best, similarity] = [undefined as string | undefined, -Infinity];
      for (const [id, identity] of identities) {
        if (identity.sum.length !== face.length) throw new RangeError(`identity gallery: a ${face.length}-d descriptor among ${identity.sum.length}-d ones`);
        const s = dot(face, identity.sum) / identity.norm;
        if (s > similarity) [best, similarity] = [id, s];
      }
      if (best !== undefined && similarity >= options.sameIdentity) {
        const identity = identities.get(best)!;
        for (let k = 0; k < face.length; k++) identity.sum[k]! += face[k]!;
        identity.norm = Math.sqrt(dot(identity.sum, identity.sum));
        identities.delete(best);
        identities.set(best, identity);
        return { id: best, similarity };
      }
      if (identities.size >= options.maxIdentities) identities.delete(identities.keys().next().value!);
      const id = `${options.prefix ?? 'person-'}${++enrolled}`;
      identities.set(id, { sum: face, norm: 1 });
      return { id, similarity: options.sameIdentity };
    },
  };
}

function dot(a: Float32Array, b: Float32Array): number {
  let sum = 0;
  for (let k = 0; k < a.length; k++) sum += a[k]! * b[k]!;
  return sum;
}

/** `v` scaled to unit length (a copy); a zero vector stays zero. */
export function unit(v: Float32Array): Float32Array {
  const norm = Math.sqrt(dot(v, v)) || 1;
  return v.map((x) => x / norm);
}
