FROM node:20-bookworm-slim
WORKDIR /app
COPY . .
# npm ci builds (prepare); dev dependencies are dropped once dist/ exists.
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --ignore-scripts
ENV MQTT_HOST=0.0.0.0 HTTP_HOST=0.0.0.0
EXPOSE 1883 9464
STOPSIGNAL SIGTERM
CMD ["node", "dist/bridge/main.js"]
