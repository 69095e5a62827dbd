export {
  BLAZEFACE,
  BLAZEFACE_DEFAULT_IOU,
  BLAZEFACE_DEFAULT_MIN_SCORE,
  decodeFaces,
  type FaceDecodeOptions,
} from './blazeface.js';
export {
  FACERES,
  FACERES_AGE_GROUP_YEARS,
  FACERES_AGE_WINDOW,
  FACERES_CLASSES,
  FACERES_DEFAULT_MALE_THRESHOLD,
  decodeFaceres,
  faceresClassAttributes,
  faceresClasses,
  preprocessFaceres,
  type FaceresPreprocessed,
} from './faceres.js';
export {
  FACEMESH,
  FACEMESH_DEFAULT_MIN_SCORE,
  decodeFacemesh,
  type FacemeshDecodeOptions,
} from './facemesh.js';
export { createIdentityGallery, unit, type Identified, type IdentityGallery, type IdentityGalleryOptions } from './identities.js';
