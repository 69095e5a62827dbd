export { createAppLogic } from './app-logic.js';
export { APP_TABLES, DETECTIONS, FRAMES, TEXTS } from './tables.js';
