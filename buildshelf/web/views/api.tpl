% include('_head.tpl', title=title, feeds=feeds)
<h1>{{api.info["title"]}} API</h1>
<p class="lead">{{api.info["summary"]}} Version {{api.info["version"]}}, described by an
<a href="/api/v2/openapi.json">OpenAPI document</a> that programs can read; this page
shows the same document.</p>
<nav class="contents" aria-label="Operations">
  <ul>
    % for tag in api.tags:
    % for o in tag.operations:
    <li><a href="#op-{{o.id}}"><code>{{o.path}}</code></a> {{o.summary}}</li>
    % end
    % end
    <li><a href="#schemas">Schemas</a>: the shapes of the bodies</li>
  </ul>
</nav>
<div class="prose">
% include('_prose.tpl', text=api.description)
</div>
% for tag in api.tags:
<section aria-labelledby="tag-{{tag.name}}">
<h2 id="tag-{{tag.name}}">{{tag.name.capitalize()}}</h2>
<p class="lead">{{tag.description}}</p>
% for o in tag.operations:
<article class="operation" id="op-{{o.id}}" aria-labelledby="op-{{o.id}}-title">
  <h3 id="op-{{o.id}}-title"><span class="method">{{o.method}}</span> <code>{{o.path}}</code></h3>
  <p class="summary">{{o.summary}}
  % if o.deprecated:
  <span class="badge">Deprecated</span>
  % end
  </p>
  <div class="prose">
  % include('_prose.tpl', text=o.description)
  </div>
  % if o.parameters:
  <h4>Parameters</h4>
  <ul class="fields">
    % for p in o.parameters:
    <li><code>{{p.name}}</code> <span class="where">{{p.where}}</span>{{", required" if p.required else ""}}: <span class="type">{{p.schema}}</span>{{"; example " if p.example else ""}}\\
% if p.example:
<code>{{p.example}}</code>\\
% end

      % include('_prose.tpl', text=p.description)
    </li>
    % end
  </ul>
  % end
  <h4>Responses</h4>
  <ul class="fields">
    % for r in o.responses:
    <li><code class="status">{{r.status}}</code>
      % for media, schema in r.content:
      <span class="type">{{media}}: {{schema}}</span>
      % end
      % include('_prose.tpl', text=r.description)
      % if r.headers:
      <p class="headers">Headers: {{", ".join(r.headers)}}</p>
      % end
    </li>
    % end
  </ul>
</article>
% end
</section>
% end
<section aria-labelledby="schemas">
<h2 id="schemas">Schemas</h2>
% for s in api.schemas:
<article class="operation" id="schema-{{s.name}}" aria-labelledby="schema-{{s.name}}-title">
  <h3 id="schema-{{s.name}}-title">{{s.name}} <span class="type">{{s.type}}</span></h3>
  <div class="prose">
  % include('_prose.tpl', text=s.description)
  </div>
  % if s.properties:
  <ul class="fields">
    % for key, schema, description in s.properties:
    <li><code>{{key}}</code>{{", required" if key in s.required else ""}}: <span class="type">{{schema}}</span>
      % include('_prose.tpl', text=description)
    </li>
    % end
  </ul>
  % end
  % for example in s.examples:
  <h4>Example</h4>
  <pre>{{example}}</pre>
  % end
</article>
% end
</section>
% include('_foot.tpl')
